// "My tasks": the instruction's length as you type, real relative times, and the status of
// each unfinished task kept live over its /ws/tasks/<id>/ socket.
(function () {
  "use strict";
  var LABELS = {
    queued: "Queued", running: "Running", waiting_operator: "Waiting for an operator",
    waiting_user: "Waiting for your answer", taken_over: "Operator in control",
    succeeded: "Succeeded", failed: "Failed", aborted: "Aborted"
  };
  var ACTIVE = ["queued", "running", "waiting_operator", "waiting_user", "taken_over"];

  var box = document.querySelector("textarea[name=instruction]");
  var counter = document.getElementById("instruction-count");
  var start = document.querySelector("#new-task button[type=submit]");
  if (box && counter) {
    var max = Number(box.dataset.max || 2000);
    var count = function () {
      var n = box.value.length;
      counter.textContent = n > max ? n + " / " + max + " characters \u2014 " + (n - max) + " too many"
        : n + " / " + max + " characters";
      counter.classList.toggle("error", n > max);
      if (start) start.disabled = n > max;
    };
    box.addEventListener("input", count);
    count();
  }

  // Caution: left empty, the task runs at the chosen phone's γ (set by an admin); the
  // placeholder and the note say which number that is for the phone selected now.
  var phone = document.querySelector("#new-task select[name=device]");
  var gamma = document.querySelector("#new-task input[name=threshold]");
  var note = document.getElementById("threshold-note");
  if (phone && gamma && note) {
    var showGamma = function () {
      var option = phone.options[phone.selectedIndex];
      var g = option ? option.dataset.gamma : "";
      gamma.placeholder = "phone's γ: " + g;
      var mayLower = gamma.dataset.mayLower === "1";
      note.textContent = "Caution: " + option.textContent + "'s γ, " + g + ", unless you change it" +
        (mayLower ? "." : " (you may raise it, not lower it).");
    };
    phone.addEventListener("change", showGamma);
    showGamma();
  }

  function ago(iso) {
    var s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
    if (s < 10) return "just now";
    if (s < 60) return s + " s ago";
    if (s < 3600) return Math.floor(s / 60) + " min ago";
    if (s < 86400) return Math.floor(s / 3600) + " h ago";
    return new Date(iso).toLocaleDateString();
  }
  function ages() {
    document.querySelectorAll("#task-table td.age[data-created]").forEach(function (td) {
      td.textContent = ago(td.dataset.created);
    });
  }
  ages();
  setInterval(ages, 5000);

  var wsBase = (location.protocol === "https:" ? "wss://" : "ws://") + location.host;
  function follow(row) {
    var socket = new WebSocket(wsBase + "/ws/tasks/" + row.dataset.taskId + "/");
    socket.onmessage = function (ev) {
      var data;
      try { data = JSON.parse(ev.data); } catch (e) { return; }
      if (data.type !== "task.updated" || !data.task) return;
      var badge = row.querySelector(".status");
      badge.className = "status s-" + data.task.status;
      badge.textContent = LABELS[data.task.status] || data.task.status;
      row.dataset.status = data.task.status;
      if (ACTIVE.indexOf(data.task.status) < 0) socket.close(1000);
    };
    socket.onclose = function (ev) {
      if (ev.code === 1000 || ev.code >= 4000) return;
      setTimeout(function () { follow(row); }, 3000);
    };
  }
  // A handful of sockets at most: only unfinished tasks, newest first.
  Array.prototype.slice.call(document.querySelectorAll("#task-table tr[data-task-id]"))
    .filter(function (row) { return ACTIVE.indexOf(row.dataset.status) >= 0; })
    .slice(0, 20).forEach(follow);
})();
