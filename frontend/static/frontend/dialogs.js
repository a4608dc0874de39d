// The in-page "Abort this task?" dialog (templates/frontend/abort_dialog.html), shared by
// the operator's ticket page (console.js) and the end user's task page (task.js): the
// browser's own confirm() blocks every tab and cannot be styled (issue 26, item 8).
(function () {
  "use strict";
  var K = window.KairosDialogs = window.KairosDialogs || {};
  // Wires the dialog once; returns the function that opens it. ``onConfirm`` receives
  // the reason written (empty where the dialog asks none).
  K.abortDialog = function (onConfirm) {
    var dialog = document.getElementById("abort-dialog");
    if (!dialog) return null;
    var reason = document.getElementById("abort-reason");
    document.getElementById("abort-cancel").addEventListener("click", function () {
      dialog.close();
    });
    document.getElementById("abort-dialog-form").addEventListener("submit", function (ev) {
      ev.preventDefault();
      dialog.close();
      onConfirm(reason ? reason.value : "");
    });
    return function open() {
      if (reason) reason.value = "";
      dialog.showModal();
      // Where no reason is asked, Enter keeps the task: the safe button has the focus.
      (reason || document.getElementById("abort-cancel")).focus();
    };
  };
})();
