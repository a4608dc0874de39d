// The end user's task page: live status, steps, screen and the clarification chat.
// User text is only ever written with textContent, never innerHTML.
(function () {
  "use strict";
  var root = document.getElementById("task");
  if (!root) return;
  var taskId = root.dataset.taskId;
  var deviceId = root.dataset.deviceId;
  var me = root.dataset.username;
  var status = root.dataset.status;
  var openTicket = root.dataset.openTicket || "";
  var ACTIVE = ["queued", "running", "waiting_operator", "waiting_user", "taken_over"];
  var LABELS = {
    queued: "Queued", running: "Running", waiting_operator: "Waiting for an operator",
    waiting_user: "Waiting for your answer", taken_over: "Operator in control",
    succeeded: "Succeeded", failed: "Failed", aborted: "Aborted"
  };
  var SENDERS = { user: "User", agent: "Agent", operator: "Operator", system: "System" };
  var wsBase = (location.protocol === "https:" ? "wss://" : "ws://") + location.host;

  var el = function (id) { return document.getElementById(id); };
  var chat = el("chat"), form = el("chat-form"), input = el("chat-text"), errorBox = el("chat-error");
  var pending = null;  // text sent and not yet echoed back: restored on error

  function node(tag, cls, text) {
    var n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== null) n.textContent = String(text);
    return n;
  }

  // --- status and the current step in plain words ---------------------------------

  var VERBS = {
    CLICK: "Tapped", LONG_CLICK: "Pressed and held", TYPE: "Typed", SCROLL: "Scrolled",
    OPENAPP: "Opened", PRESS_BACK: "Went back", PRESS_HOME: "Went to the home screen",
    PRESS_ENTER: "Pressed enter", WAIT: "Waited for the screen", COMPLETE: "Finished",
    IMPOSSIBLE: "Gave up: this cannot be done here"
  };

  // Says only what is true of a step (issue 15, item 9): a step that never ran says why,
  // a failed action says it failed, and an element is named by its words, never its id.
  function describe(step, taskStatus) {
    if (step.status === "waiting") {
      return taskStatus === "waiting_user" ? "Asking you a question" : "Waiting for a person";
    }
    if (step.status === "cancelled") {
      return step.outcome === "taken over" ? "Handed to an operator, who used the phone"
        : "Not done: the task ended first";
    }
    var action = step.action || step.proposed_action;
    if (!action) {
      if (step.status === "answered") return "Asked you a question";
      return step.summary || step.status;
    }
    var text = doneText(step, action);
    if (/^error/.test(step.outcome || "")) {
      return "Tried: " + text.charAt(0).toLowerCase() + text.slice(1) + " \u2014 it did not work";
    }
    return text;
  }

  function doneText(step, action) {
    var verb = VERBS[action.type] || action.type;
    if (action.type === "TYPE") return verb + " \u201c" + (action.text || "") + "\u201d";
    if (action.type === "OPENAPP") return verb + " " + (action.app || "an app");
    if (action.type === "SCROLL") return verb + " " + String(action.direction || "").toLowerCase();
    // The server names the element as a person would (its text or its row's caption);
    // the summary's label may be the words of a resource id ("thread dr lee s office").
    var label = step.target_label || (action.element && !/[_\/]/.test(action.element) ? action.element : "");
    if (label) return verb + " \u201c" + label + "\u201d";
    if (action.type === "CLICK" || action.type === "LONG_CLICK") return verb + " the screen";
    return verb;
  }

  function whoDid(step, tickets) {
    if (step.by === "operator") return "by an operator";
    var approved = (tickets || []).some(function (t) {
      return t.step === step.index && t.decision === "approve";
    });
    return approved ? "by the agent, approved by an operator" : "by the agent";
  }

  function nowText(task, steps) {
    switch (task.status) {
      case "queued":
        // One task drives a phone at a time: this one waits for the tasks ahead of it.
        return task.queue_position ? "Queued, position " + task.queue_position +
          " — waiting for the phone." : "Waiting to start…";
      case "waiting_user": return "Waiting for your answer in the chat.";
      case "waiting_operator": return "An operator is checking the next step.";
      case "taken_over": return "An operator is using the phone for you.";
      case "succeeded": return "Finished.";
      case "aborted":
        var who = /^aborted by ([^:]+)(?:: ([\s\S]*))?$/.exec(task.error || "");
        var why = who && who[2] ? " Reason: " + who[2] : "";
        if (who && who[1] === me) return "You stopped this task." + why;
        return who ? "An operator (" + who[1] + ") stopped this task." + why
          : "Stopped: " + (task.error || "no reason given") + ".";
      case "failed": return "Could not finish" + (task.error ? ": " + task.error + "." : ".");
    }
    var done = (steps || []).filter(function (s) { return s.status === "done" && s.action; });
    if (!done.length) return "Looking at the screen\u2026";
    return "Step " + (done.length + 1) + " \u2014 last: " + describe(done[done.length - 1]);
  }

  function showTask(task) {
    // A finished task never runs again: an update of an earlier state that arrives after
    // the end (the worker's and the answer's updates are not ordered) changes nothing.
    if (status && ACTIVE.indexOf(status) < 0 && ACTIVE.indexOf(task.status) >= 0) return;
    status = task.status;
    var badge = el("task-status");
    badge.className = "status s-" + task.status;
    badge.textContent = LABELS[task.status] || task.status;
    root.dataset.status = task.status;
    var result = el("task-result");
    result.textContent = "";
    if (task.success === true || task.success === false) {
      result.appendChild(document.createTextNode(" \u00b7 result: "));
      result.appendChild(node("strong", null, task.success ? "done as asked" : "not achieved"));
    }
    el("task-now").textContent = nowText(task, null);
    if (ACTIVE.indexOf(task.status) < 0) {
      var abort = el("abort-form");
      if (abort) abort.remove();
      var asking = el("abort-dialog");
      if (asking && asking.open) asking.close();  // nothing left to abort
      // The owner is asked whether Kairos did what they asked (shown for owners only).
      var verdict = el("verdict-form");
      if (verdict) verdict.hidden = false;
      // After a reload the server already shows the final screenshot and says so.
      stopScreen(el("final-screen") ? null
        : el("live-screen").hidden ? "The task has finished." : "The screen when the task ended.");
      disableQuickReplies(null);
      // Nothing reads the chat of a finished task (the server refuses it too).
      input.disabled = true;
      form.querySelector("button").disabled = true;
      input.placeholder = "The task has finished; the chat is closed";
      return;
    }
    // While an operator has the task, their question (asked from a ticket) stays open;
    // replies of tickets that closed are disabled by refresh().
    if (task.status !== "waiting_user" && task.status !== "waiting_operator") disableQuickReplies(null);
    input.placeholder = task.status === "waiting_user" ? "Your answer" : "Write a message";
  }

  // The socket sends summaries; steps come from the API (same session) after each update.
  var refreshing = false, again = false;
  function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    fetch("/api/tasks/" + taskId, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (!data) return;
        renderSteps(data.steps || [], data.status, data.tickets);
        // Catch up on messages sent before the socket was open (the page may render
        // before the agent asks, and the socket connect after); appendMessage skips
        // the ones already shown.
        (data.messages || []).forEach(appendMessage);
        el("task-now").textContent = nowText(data, data.steps);
        var open = (data.tickets || []).filter(function (t) {
          return t.kind === "clarification" && (t.status === "open" || t.status === "claimed");
        });
        // This answer may have been read before a question the socket has just drawn:
        // it closes only the questions it knows are over, never one it has not seen.
        var over = closedTickets(data.tickets);
        if (open.length) openTicket = open[0].id;
        else if (over[openTicket]) openTicket = "";
        Object.keys(over).forEach(disableQuickReplies);
      })
      .catch(function () { /* the next update retries */ })
      .then(function () {
        refreshing = false;
        if (again) { again = false; refresh(); }
      });
  }

  function renderSteps(steps, taskStatus, tickets) {
    var list = el("steps");
    list.textContent = "";
    if (!steps.length) { list.appendChild(node("li", "muted", "No steps yet.")); return; }
    steps.forEach(function (s) {
      var li = node("li");
      li.dataset.step = s.index;
      if (s.screenshot_url) {
        // The thumbnail opens the full-size screenshot.
        var link = node("a", "thumb-link");
        link.href = s.screenshot_url;
        link.target = "_blank";
        link.rel = "noopener";
        var img = node("img", "thumb");
        img.src = s.screenshot_url;
        img.alt = "step " + (s.index + 1);  // numbered from 1, as in the log
        link.appendChild(img);
        li.appendChild(link);
      }
      li.appendChild(node("span", null, describe(s, taskStatus)));
      li.appendChild(document.createTextNode(" "));
      if (s.status !== "waiting" && s.status !== "cancelled") li.appendChild(node("span", "muted", whoDid(s, tickets)));
      list.appendChild(li);
    });
  }

  // --- chat ------------------------------------------------------------------------

  function closedTickets(tickets) {
    var over = {};
    (tickets || []).forEach(function (t) {
      if (t.status !== "open" && t.status !== "claimed") over[t.id] = true;
    });
    return over;
  }

  function disableQuickReplies(ticket) {
    chat.querySelectorAll(".quick-replies").forEach(function (group) {
      if (ticket === null || group.dataset.ticket === ticket) {
        group.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
        group.classList.add("closed");
      }
    });
  }

  function quickReplies(ticket, options) {
    var group = node("div", "quick-replies");
    group.dataset.ticket = ticket;
    options.forEach(function (option) {
      var b = node("button", "quick-reply", option);
      b.type = "button";
      b.addEventListener("click", function () { send(option, ticket); });
      group.appendChild(b);
    });
    return group;
  }

  function appendMessage(m) {
    if (chat.querySelector('[data-message-id="' + m.id + '"]')) return;
    var empty = chat.querySelector("li.empty");
    if (empty) empty.remove();
    var li = node("li", "from-" + m.sender);
    li.dataset.messageId = m.id;
    if (m.ticket) li.dataset.ticket = m.ticket;
    var who = m.sender === "user" && m.author === me ? "You" : (SENDERS[m.sender] || m.sender);
    li.appendChild(node("b", null, who));
    li.appendChild(document.createTextNode(" "));
    li.appendChild(node("span", "text", m.text));
    // The agent's questions and an operator's (asked from a ticket) offer quick replies.
    if ((m.sender === "agent" || m.sender === "operator") && m.ticket && m.options && m.options.length) {
      openTicket = m.ticket;
      li.appendChild(quickReplies(m.ticket, m.options));
    }
    if (m.sender === "user" && m.ticket) disableQuickReplies(m.ticket);
    chat.appendChild(li);
    chat.scrollTop = chat.scrollHeight;
    if (m.sender === "user" && pending !== null && m.text === pending.trim()) {
      pending = null;
      input.value = "";
    }
  }

  function showError(detail) {
    errorBox.textContent = detail;
    errorBox.hidden = false;
  }

  // A message sent while the socket is not open — not yet, as the page has just been
  // drawn (with the question, on a loaded machine), or not now, the network dropped — goes
  // as soon as it is: refusing it ("try again in a moment") lost the answer (issue 23.8).
  var queued = null;
  function send(text, ticket) {
    errorBox.hidden = true;
    if (!socket || socket.readyState !== WebSocket.OPEN) {
      queued = { text: text, ticket: ticket };
      showError("Not connected yet; your message will be sent as soon as the page is.");
      return false;
    }
    var payload = { type: "chat.message", text: text };
    if (ticket) payload.ticket = ticket;
    pending = text;
    socket.send(JSON.stringify(payload));
    return true;
  }

  // Abort asks first, in the page (dialogs.js, shared with the console); only the
  // dialog's "Abort task" posts the form.
  var abortForm = el("abort-form");
  var askAbort = abortForm && window.KairosDialogs.abortDialog(function () {
    if (document.body.contains(abortForm)) abortForm.submit();
  });
  if (abortForm && askAbort) {
    abortForm.addEventListener("submit", function (ev) {
      ev.preventDefault();
      askAbort();
    });
    // Drawn disabled: a click before this line would have posted the form and
    // aborted the task without asking (issue 23.8).
    el("abort").disabled = false;
  }

  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    send(input.value, null);
  });
  // Server-rendered quick replies (page loaded while a question was open).
  chat.querySelectorAll("form.quick-replies").forEach(function (f) {
    var ticket = f.querySelector("[name=ticket]").value;
    f.dataset.ticket = ticket;
    f.querySelectorAll("button.quick-reply").forEach(function (b) {
      b.type = "button";
      b.addEventListener("click", function () { send(b.value, ticket); });
    });
  });

  // --- the task socket -------------------------------------------------------------

  var socket = null, retry = 500;
  function connect() {
    socket = new WebSocket(wsBase + "/ws/tasks/" + taskId + "/");
    socket.onopen = function () {
      retry = 500;
      root.classList.remove("offline");
      if (queued) {
        var message = queued;
        queued = null;
        send(message.text, message.ticket);
      }
    };
    socket.onmessage = function (ev) {
      var data;
      try { data = JSON.parse(ev.data); } catch (e) { return; }
      if (data.type === "task.updated" && data.task && String(data.task.id) === taskId) {
        showTask(data.task);
        refresh();
      } else if (data.type === "chat.message" && data.message) {
        appendMessage(data.message);
      } else if (data.type === "error") {
        if (pending !== null && !input.value) input.value = pending;
        pending = null;
        showError(data.detail || "That did not work.");
      }
    };
    socket.onclose = function (ev) {
      root.classList.add("offline");
      if (ev.code === 4401 || ev.code === 4403) {
        showError(ev.code === 4401 ? "Your session has ended; log in again." : "You may not follow this task.");
        return;
      }
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }

  // --- the live screen -------------------------------------------------------------

  var screen = null, screenUrl = null, screenStopped = false;
  function startScreen() {
    if (screenStopped || ACTIVE.indexOf(status) < 0) return;
    var img = el("live-screen"), note = el("live-screen-note");
    screen = new WebSocket(wsBase + "/ws/devices/" + deviceId + "/screen/");
    screen.binaryType = "blob";
    screen.onmessage = function (ev) {
      if (typeof ev.data === "string") {
        var meta;
        try { meta = JSON.parse(ev.data); } catch (e) { return; }
        if (meta.type === "screen.meta") {
          img.width = Math.round(meta.width / 3);
          img.style.aspectRatio = meta.width + " / " + meta.height;
          note.textContent = "Live";
        } else if (meta.type === "screen.error") {
          note.textContent = meta.detail || "The screen is unavailable.";
        }
        return;
      }
      var url = URL.createObjectURL(ev.data);
      img.onload = function () { if (screenUrl && screenUrl !== url) URL.revokeObjectURL(screenUrl); screenUrl = url; };
      img.src = url;
      img.hidden = false;
    };
    screen.onclose = function (ev) {
      screen = null;
      if (screenStopped || ACTIVE.indexOf(status) < 0) return;
      if (ev.code === 4403 || ev.code === 4401 || ev.code === 4404) {
        note.textContent = "The live screen is not available.";
        return;
      }
      setTimeout(startScreen, 2000);
    };
  }
  function stopScreen(text) {
    screenStopped = true;
    if (text !== null) el("live-screen-note").textContent = text;
    if (screen) screen.close();
  }

  connect();
  startScreen();
  refresh();  // the steps in the same words as the live updates use
})();
