"""A phone for tests and benchmarks without a phone: the simulator seen through adb.

* :mod:`devices.adb.fake.adbd` — a fake *device* that speaks the adb transport protocol
  (CNXN/OPEN/OKAY/WRTE/CLSE) over TCP, exactly what a phone's ``adbd`` speaks after
  ``adb tcpip``. The real ``adb`` server connects to it with ``adb connect``, so the
  driver's requests go adbutils → real adb server → fake phone, as with a Wi-Fi phone.
* :mod:`devices.adb.fake.shell` — the phone's shell: the few commands the driver uses
  (``screencap``, ``uiautomator dump``, ``input``, ``monkey``, ``wm size``, ``getprop``,
  ``pm list packages``, ``app_process`` starting the scrcpy server) on a simulated phone.
* :mod:`devices.adb.fake.scrcpy_end` — the scrcpy server's device end: encodes the
  simulator's frames to H.264 with PyAV and frames them as the real server does; parses
  control messages into simulator actions.

Pure Python (no Django), like the simulator it wraps.
"""
