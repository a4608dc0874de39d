/* Kairos operator console: live ticket queue, live phone screens, the ticket view and
 * take-over. Talks to the server only through the JSON API (session + CSRF) and the
 * WebSockets of CONTRACT.md. No framework, no build step. */
(function () {
  "use strict";

  const SVG = "http://www.w3.org/2000/svg";
  const KEY_LABELS = {
    PRESS_BACK: "◀ Back", PRESS_HOME: "⌂ Home", PRESS_ENTER: "↵ Enter", WAIT: "◷ Wait",
    COMPLETE: "✓ Complete", IMPOSSIBLE: "✕ Impossible",
  };
  const REASONS = {
    low_confidence: "Low confidence", ambiguous_intent: "Ambiguous intent",
    sensitive_action: "Sensitive action", parse_failure: "Unparseable output",
    toggle_state: "Toggle already set", repeated_failure: "Repeated failure",
    device_error: "Device error", model_error: "Model error", spot_check: "Spot check",
    takeover_lapsed: "Take-over lapsed", no_progress: "No progress",
  };

  // --- plumbing ------------------------------------------------------------------------

  function cookie(name) {
    const hit = document.cookie.split("; ").find((c) => c.startsWith(name + "="));
    return hit ? decodeURIComponent(hit.slice(name.length + 1)) : "";
  }

  async function api(method, path, body) {
    const response = await fetch("/api" + path, {
      method, credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRFToken": cookie("csrftoken")},
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (!response.ok) {
      const error = new Error((data && data.detail) || response.statusText);
      error.status = response.status;
      throw error;
    }
    return data;
  }

  function wsUrl(path) {
    return (location.protocol === "https:" ? "wss://" : "ws://") + location.host + path;
  }

  /* A socket that reconnects (with backoff) until the page goes away. A close with an
   * application code (4401 / 4403 / 4404) is final: retrying cannot help. */
  function liveSocket(path, handlers) {
    let delay = 500;
    let socket = null;
    function open() {
      socket = new WebSocket(wsUrl(path));
      socket.binaryType = "blob";
      socket.onopen = () => { delay = 500; handlers.open && handlers.open(socket); };
      socket.onmessage = (e) => {
        if (typeof e.data === "string") handlers.json && handlers.json(JSON.parse(e.data), socket);
        else handlers.binary && handlers.binary(e.data, socket);
      };
      socket.onclose = (e) => {
        handlers.close && handlers.close(e);
        if (e.code >= 4000 && e.code < 5000) return;
        setTimeout(open, delay);
        delay = Math.min(delay * 2, 8000);
      };
    }
    open();
    return { send: (obj) => socket && socket.readyState === 1 && socket.send(JSON.stringify(obj)),
             get socket() { return socket; } };
  }

  /* Shows JPEG frames from /ws/devices/<id>/screen/ in every <img> passed; the
   * newest frame replaces the previous object URL (freed at once). */
  function screenStream(deviceId, imgs, onMeta) {
    let url = null;
    const meta = { width: 0, height: 0 };
    const stream = liveSocket(`/ws/devices/${deviceId}/screen/`, {
      json(msg) {
        if (msg.type === "screen.meta") { meta.width = msg.width; meta.height = msg.height; onMeta && onMeta(msg); }
        else if (msg.type === "error" || msg.type === "screen.error") flash(msg.detail, true);
        else if (msg.type === "input.done") stream.onInput && stream.onInput(msg);
      },
      binary(blob) {
        const next = URL.createObjectURL(blob);
        imgs.forEach((img) => { img.src = next; img.dataset.frames = String(Number(img.dataset.frames || 0) + 1); });
        if (url) URL.revokeObjectURL(url);
        url = next;
      },
    });
    stream.meta = meta;
    stream.imgs = imgs;
    return stream;
  }

  function flash(text, isError) {
    const el = document.getElementById("flash");
    if (!el) return;
    el.textContent = text || "";
    el.classList.toggle("error", !!isError);
  }

  function age(iso) {
    if (!iso) return "";
    const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min";
    return Math.floor(s / 3600) + " h";
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    Object.entries(attrs || {}).forEach(([k, v]) => {
      if (k === "class") node.className = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else if (v !== null && v !== undefined && v !== false) node.setAttribute(k, v);
    });
    children.forEach((c) => node.append(c instanceof Node ? c : document.createTextNode(String(c))));
    return node;
  }

  function describe(action) {
    if (!action) return "none";
    const t = action.type;
    if (action.x !== undefined) return `${t} (${action.x}, ${action.y})`;
    if (t === "TYPE") return `TYPE "${action.text}"`;
    if (t === "SCROLL") return `SCROLL ${action.direction}`;
    if (t === "OPENAPP") return `OPENAPP ${action.app}`;
    return t;
  }

  // --- the queue's order, shared by the queue and "next ticket" -------------------------

  // Sensitive actions first (a person must approve them before anything happens), then
  // the oldest: what operators of such queues expect (issue 26).
  function byPriority(a, b) {
    const s = (t) => (t.reason === "sensitive_action" ? 0 : 1);
    return s(a) - s(b) || Date.parse(a.created_at) - Date.parse(b.created_at);
  }
  const waitsForOperators = (t) => (t.status === "open" || t.status === "claimed") &&
    !(t.kind === "clarification" && !t.escalated);

  // The next ticket this operator may take, after ``exclude``: none held by someone else.
  async function nextTicket(me, exclude) {
    const list = (await api("GET", "/tickets?status=open"))
      .filter((t) => waitsForOperators(t) && t.id !== exclude && (!t.assignee || t.assignee === me))
      .sort(byPriority);
    return list.length ? list[0] : null;
  }

  // --- the queue (/console/) -----------------------------------------------------------

  function initConsole() {
    const root = document.getElementById("console");
    const me = root.dataset.user;
    const body = document.querySelector("#queue tbody");
    const empty = document.getElementById("queue-empty");
    const tickets = new Map();
    const gone = new Set();

    function row(t) {
      const held = t.assignee;
      const mine = held === me;
      const actions = el("td", {class: "row-actions"});
      if (!held) actions.append(el("button", {type: "button", class: "claim", onclick: () => claim(t.id)}, "Claim"));
      if (mine) actions.append(el("button", {type: "button", class: "release", onclick: () => release(t.id)}, "Release"));
      // On the 1–5 scale, to one decimal, as the ticket page shows it.
      const conf = t.confidence === null || t.confidence === undefined ? "–" : Number(t.confidence).toFixed(1);
      const reason = t.kind === "clarification"
        ? "Unanswered question: " + (t.question || "") : (REASONS[t.reason] || t.reason);
      const classes = [held ? (mine ? "mine" : "held") : "", t.reason === "sensitive_action" ? "sensitive" : "",
                       late(t.created_at) ? "late" : ""].filter(Boolean).join(" ");
      return el("tr", {"data-ticket-id": t.id, "data-status": t.status, class: classes},
        el("td", {}, el("a", {href: `/console/tickets/${t.id}/`}, reason)),
        el("td", {class: "instr", title: t.instruction}, t.instruction.length > 60 ? t.instruction.slice(0, 59) + "…" : t.instruction),
        el("td", {}, t.device),
        el("td", {class: "conf"}, conf),
        el("td", {class: "holder"}, held ? (mine ? "you" : held) : "–"),
        el("td", {class: "age", "data-created": t.created_at, title: `waiting ${age(t.created_at)}`}, ageText(t.created_at)),
        actions);
    }
    // The SLA warning: a ticket waiting longer than KAIROS_TICKET_SLA is marked late.
    const sla = Number(root.dataset.sla || 120) * 1000;
    function late(iso) { return !!iso && Date.now() - Date.parse(iso) > sla; }
    function ageText(iso) { return age(iso) + (late(iso) ? " · late" : ""); }

    // The tab says how many tickets wait, so a console in a background tab is noticed.
    const baseTitle = document.title;
    // Rows are kept, not redrawn, while their ticket is unchanged: a live update that
    // replaced every row took the link from under a click in progress (pressed before the
    // update, released after), and the click opened nothing (issue 23.8).
    function render() {
      const kept = new Map([...body.querySelectorAll("tr[data-ticket-id]")]
        .map((tr) => [tr.dataset.ticketId, tr]));
      [...tickets.values()].sort(byPriority).forEach((t, i) => {
        const drawn = JSON.stringify(t);
        let tr = kept.get(t.id);
        kept.delete(t.id);
        if (!tr || tr.dataset.drawn !== drawn) {
          const fresh = row(t);
          fresh.dataset.drawn = drawn;
          if (tr) tr.replaceWith(fresh);
          tr = fresh;
        }
        const here = body.children[i];
        if (here !== tr) body.insertBefore(tr, here || null);
      });
      kept.forEach((tr) => tr.remove());
      markCurrent();
      empty.hidden = tickets.size > 0;
      const waiting = [...tickets.values()].filter((t) => !t.assignee).length;
      document.title = (waiting ? `(${waiting}) ` : "") + baseTitle;
    }

    // Optional sound on a new ticket; the choice is kept in this browser.
    const sound = document.getElementById("sound-toggle");
    sound.checked = localStorage.getItem("kairos.sound") === "1";
    sound.addEventListener("change", () => localStorage.setItem("kairos.sound", sound.checked ? "1" : "0"));
    let audio = null;
    function chime() {
      if (!sound.checked) return;
      try {
        audio = audio || new AudioContext();
        const osc = audio.createOscillator(), gain = audio.createGain();
        osc.frequency.value = 880;
        gain.gain.setValueAtTime(0.15, audio.currentTime);
        gain.gain.exponentialRampToValueAtTime(0.001, audio.currentTime + 0.4);
        osc.connect(gain).connect(audio.destination);
        osc.start(); osc.stop(audio.currentTime + 0.4);
      } catch (_) { /* no audio device: the title count still tells */ }
    }

    // Opt-in desktop notifications (the Notification API) for a new ticket, for a console
    // in a background tab or behind other windows; the choice is kept in this browser.
    const notify = document.getElementById("notify-toggle");
    notify.checked = localStorage.getItem("kairos.notify") === "1" &&
      "Notification" in window && Notification.permission === "granted";
    notify.addEventListener("change", async () => {
      if (notify.checked) {
        const permission = "Notification" in window ? await Notification.requestPermission() : "denied";
        if (permission !== "granted") {
          notify.checked = false;
          flash("This browser does not allow notifications for Kairos (see its site settings).", true);
        }
      }
      localStorage.setItem("kairos.notify", notify.checked ? "1" : "0");
    });
    function notifyOf(t) {
      if (!notify.checked || !("Notification" in window) || Notification.permission !== "granted") return;
      const reason = t.kind === "clarification" ? "Unanswered question" : (REASONS[t.reason] || t.reason);
      const n = new Notification(`Kairos: ${reason}`, {body: `${t.device}: ${t.instruction}`, tag: t.id});
      n.onclick = () => { window.focus(); location.href = `/console/tickets/${t.id}/`; };
      notify.dataset.shown = String(Number(notify.dataset.shown || 0) + 1);
    }
    const next = document.getElementById("next-toggle");
    next.checked = localStorage.getItem("kairos.next") === "1";
    next.addEventListener("change", () => localStorage.setItem("kairos.next", next.checked ? "1" : "0"));

    // J / K move through the queue, Enter opens the ticket.
    let current = -1;
    function markCurrent() {
      const rows = [...body.querySelectorAll("tr[data-ticket-id]")];
      rows.forEach((r, i) => r.classList.toggle("current", i === current));
    }
    document.addEventListener("keydown", (e) => {
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      if (["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement.tagName)) return;
      const rows = [...body.querySelectorAll("tr[data-ticket-id]")];
      if (!rows.length) return;
      const key = e.key.toLowerCase();
      if (key === "j" || key === "k") {
        current = Math.max(0, Math.min(rows.length - 1, current + (key === "j" ? 1 : -1)));
        markCurrent();
        rows[current].scrollIntoView({block: "nearest"});
      } else if (e.key === "Enter" && current >= 0 && rows[current]) {
        e.preventDefault();
        location.href = `/console/tickets/${rows[current].dataset.ticketId}/`;
      }
    });
    // The hint is drawn hidden and shown once the keys work (issue 23.8: on a slow
    // machine a J pressed before this line did nothing, while the page said it would).
    const queueKeys = document.getElementById("queue-keys");
    if (queueKeys) queueKeys.hidden = false;

    function put(t) {
      if (gone.has(t.id)) return;
      // A question is the user's until it is escalated after the timeout.
      if (t.kind === "clarification" && !t.escalated) return;
      if (t.status === "open" || t.status === "claimed") tickets.set(t.id, t);
      else { tickets.delete(t.id); gone.add(t.id); }
    }

    async function claim(id) {
      try { put(await api("POST", `/tickets/${id}/claim`)); location.href = `/console/tickets/${id}/`; }
      catch (e) { alert(e.message); }
    }
    async function release(id) {
      try { put(await api("POST", `/tickets/${id}/release`)); render(); } catch (e) { alert(e.message); }
    }

    // The queue the server drew is where the page starts: a ticket event that comes
    // before the catch-up list below adds to it. (Started empty, the page let such an
    // event replace the drawn rows: the queue went blank — "Nothing needs a person right
    // now" — under the operator's pointer until the list came back; issue 23.8.)
    JSON.parse(root.dataset.queue || "[]").forEach(put);
    render();

    // Ids an event touched while a catch-up list was on its way: the list was read before
    // the event, so for these the event is newer and the list must not undo it.
    let touched = null;
    liveSocket("/ws/operator/", {
      async open() {
        // Catch up on what happened while the socket was down; events win over the list.
        // The live dot turns on once the queue is caught up, not merely connected.
        touched = new Set();
        let list;
        try { list = await api("GET", "/tickets?status=open"); }
        catch (_) { touched = null; return; }  // the events still arrive; the next open retries
        const fresh = new Map(list.map((t) => [t.id, t]));
        for (const id of [...tickets.keys()]) if (!fresh.has(id) && !touched.has(id)) tickets.delete(id);
        list.forEach((t) => { if (!touched.has(t.id)) put(t); });
        touched = null;
        render();
        document.getElementById("queue-live").classList.add("on");
      },
      json(msg) {
        if (msg.type === "task.updated") { showTaskOnTile(msg.task); dropTakenOver(msg.task); }
        if (msg.type === "operators.online") document.getElementById("online").textContent = msg.online.join(", ") || "–";
        if (msg.type === "ticket.resolved" && msg.ticket.decision === "takeover") addTakenOver(msg.ticket);
        if (msg.type === "ticket.opened" || msg.type === "ticket.claimed" || msg.type === "ticket.resolved") {
          if (msg.type === "ticket.opened") {
            gone.delete(msg.ticket.id);
            if (!tickets.has(msg.ticket.id)) { chime(); notifyOf(msg.ticket); }
          }
          if (touched) touched.add(msg.ticket.id);
          put(msg.ticket);
          render();
        }
      },
      close() { document.getElementById("queue-live").classList.remove("on"); },
    });
    setInterval(() => document.querySelectorAll("#queue td.age").forEach((td) => {
      td.textContent = ageText(td.dataset.created);
      td.closest("tr").classList.toggle("late", late(td.dataset.created));
    }), 1000);

    // "In control now": the take-overs in progress and who holds them, live; an admin
    // may hand back anyone's (audited), e.g. an operator who left without handing back.
    const takenList = document.getElementById("taken-over");
    const isAdmin = root.dataset.admin === "1";
    function showTakenOver() {
      document.getElementById("taken-over-empty").hidden = takenList.children.length > 0;
    }
    function addTakenOver(ticket) {
      if (takenList.querySelector(`li[data-task-id="${ticket.task}"]`)) return;
      const item = el("li", {"data-task-id": ticket.task},
        el("b", {class: "who"}, ticket.resolved_by || "an operator"), " drives ", el("b", {}, ticket.device), ": ",
        el("span", {class: "instr"}, ticket.instruction.length > 50 ? ticket.instruction.slice(0, 49) + "…" : ticket.instruction),
        " · ", el("a", {href: `/console/tickets/${ticket.id}/`}, "ticket"));
      if (isAdmin) item.append(" ", el("button", {type: "button", class: "hand-back", "data-task-id": ticket.task}, "Hand back"));
      takenList.append(item);
      showTakenOver();
    }
    function dropTakenOver(task) {
      const item = takenList.querySelector(`li[data-task-id="${task.id}"]`);
      if (item && task.status !== "taken_over") { item.remove(); showTakenOver(); }
    }
    takenList.addEventListener("click", async (e) => {
      const button = e.target.closest("button.hand-back");
      if (!button) return;
      button.disabled = true;
      try { dropTakenOver(await api("POST", `/tasks/${button.dataset.taskId}/hand_back`)); }
      catch (err) { button.disabled = false; alert(err.message); }
    });

    // Each phone tile says which task runs on it, kept live from task.updated.
    const ACTIVE = ["queued", "running", "waiting_operator", "waiting_user", "taken_over"];
    function showTaskOnTile(task) {
      const tile = document.querySelector(`.device-tile[data-device-id="${task.device_id}"]`);
      if (!tile) return;
      const label = tile.querySelector(".device-task");
      if (ACTIVE.includes(task.status) && task.status !== "queued") {
        label.dataset.taskId = task.id;
        label.textContent = task.instruction.length > 40 ? task.instruction.slice(0, 39) + "…" : task.instruction;
        label.title = task.instruction;
      } else if (label.dataset.taskId === task.id) {
        label.dataset.taskId = "";
        label.textContent = "Idle";
        label.title = "";
      }
    }

    // Live device grid: one socket per phone; the selected one is also shown large.
    const bigView = document.getElementById("big-view");
    const bigImg = document.getElementById("big-img");
    const streams = new Map();
    let selected = null;
    function select(tile) {
      document.querySelectorAll(".device-tile").forEach((t) => t.classList.toggle("selected", t === tile));
      if (selected) selected.imgs.splice(selected.imgs.indexOf(bigImg), 1);
      selected = streams.get(tile.dataset.deviceId);
      const current = tile.querySelector("img").src;
      if (current) bigImg.src = current;
      selected.imgs.push(bigImg);
      document.getElementById("big-name").textContent = tile.dataset.deviceName;
      bigView.hidden = false;
    }
    document.querySelectorAll(".device-tile").forEach((tile) => {
      streams.set(tile.dataset.deviceId, screenStream(tile.dataset.deviceId, [tile.querySelector("img")]));
      tile.addEventListener("click", () => select(tile));
    });
    const first = document.querySelector(".device-tile");
    if (first) select(first);
    // An idle phone back to its home screen, so the next task does not start wherever the
    // last one left it.
    document.getElementById("reset-home").addEventListener("click", async () => {
      const tile = document.querySelector(".device-tile.selected");
      const note = document.getElementById("reset-note");
      if (!tile) return;
      try {
        await api("POST", `/devices/${tile.dataset.deviceId}/home`);
        note.textContent = `${tile.dataset.deviceName} is on its home screen.`;
        note.classList.remove("error");
      } catch (e) { note.textContent = e.message; note.classList.add("error"); }
    });
  }

  // --- the ticket view (/console/tickets/<id>/) ----------------------------------------

  function drawAction(group, action, w, h, cls) {
    group.replaceChildren();
    if (!action) return;
    const add = (tag, attrs) => {
      const node = document.createElementNS(SVG, tag);
      Object.entries(attrs).forEach(([k, v]) => node.setAttribute(k, v));
      group.append(node);
      return node;
    };
    const r = Math.round(w / 27);
    if (action.x !== undefined && action.y !== undefined) {
      add("circle", {cx: action.x, cy: action.y, r, class: cls + " target"});
      add("line", {x1: action.x - 2 * r, y1: action.y, x2: action.x + 2 * r, y2: action.y, class: cls + " cross"});
      add("line", {x1: action.x, y1: action.y - 2 * r, x2: action.x, y2: action.y + 2 * r, class: cls + " cross"});
    } else if (action.type === "SCROLL") {
      // The arrow points where the finger moves (CONTRACT "Actions").
      const d = {UP: [0, -1], DOWN: [0, 1], LEFT: [-1, 0], RIGHT: [1, 0]}[action.direction] || [0, 0];
      const cx = w / 2, cy = h / 2, len = Math.min(w, h) * 0.3;
      const x2 = cx + d[0] * len, y2 = cy + d[1] * len;
      add("line", {x1: cx - d[0] * len, y1: cy - d[1] * len, x2, y2, class: cls + " arrow"});
      const hx = -d[0] * r * 1.5, hy = -d[1] * r * 1.5;
      add("polygon", {points: `${x2},${y2} ${x2 + hx - hy},${y2 + hy + hx} ${x2 + hx + hy},${y2 + hy - hx}`, class: cls + " head"});
    } else {
      // Every other action is a labelled badge: light text on a dark plate with a light
      // rim, legible on any screen (a light settings page or a dark launcher alike).
      const text = action.type === "TYPE" ? `⌨ Type “${action.text}”`
        : action.type === "OPENAPP" ? `Open ${action.app}`
        : KEY_LABELS[action.type] || action.type;
      const size = Math.round(w / 19);
      const height = size * 1.9;
      const width = Math.min(w * 0.9, Math.max(w * 0.45, size * 0.62 * text.length + size * 1.6));
      // Where it covers the fewest of the screen's elements (the middle when that is free):
      // always in the middle, it covered the very icons (an app to open on the launcher)
      // the person must see to judge it.
      const svg = group.ownerSVGElement;
      const boxes = [...(svg ? svg.querySelectorAll("#cands rect") : [])].map((r) =>
        ["x", "y", "width", "height"].map((k) => Number(r.getAttribute(k))));
      const left = (w - width) / 2, right = (w + width) / 2;
      const covers = (y) => boxes.filter(([bx, by, bw, bh]) =>
        bx < right && left < bx + bw && by < y + height / 2 && y - height / 2 < by + bh).length;
      const cy = [0.5, 0.66, 0.33, 0.8, 0.2, 0.88].map((f) => h * f)
        .reduce((best, y) => (covers(y) < covers(best) ? y : best));
      add("rect", {x: (w - width) / 2, y: cy - height / 2, width, height, rx: height / 2,
                   class: cls + " label-bg"});
      const attrs = {x: w / 2, y: cy, "text-anchor": "middle", "dominant-baseline": "central",
                     "font-size": size, class: cls + " label"};
      // A long TYPE text is squeezed into the plate rather than running off the screen.
      if (text.length * size * 0.62 > width * 0.92) Object.assign(attrs, {textLength: width * 0.92, lengthAdjust: "spacingAndGlyphs"});
      add("text", attrs).textContent = text;
    }
  }

  function initTicket() {
    const root = document.getElementById("ticket");
    const ticketId = root.dataset.ticketId;
    const taskId = root.dataset.taskId;
    const me = root.dataset.user;
    const state = {status: root.dataset.status, assignee: root.dataset.assignee,
                   taskStatus: root.dataset.taskStatus, takeover: root.dataset.takeover === "1",
                   decision: root.dataset.decision, resolvedBy: root.dataset.resolvedBy,
                   answer: root.dataset.answer, answeredByUser: root.dataset.answeredByUser === "1",
                   editing: false, busy: false};
    const $ = (id) => document.getElementById(id);
    const shot = $("screenshot");
    const W = shot ? Number(shot.dataset.width) : 1080, H = shot ? Number(shot.dataset.height) : 2400;
    const proposed = JSON.parse($("proposed-action").textContent);
    if ($("proposal")) drawAction($("proposal"), proposed, W, H, "prop");
    if (proposed) $("proposed").textContent = describe(proposed);

    const isOpen = () => state.status === "open" || state.status === "claimed";
    const holdsIt = () => state.status === "claimed" && state.assignee === me;
    const mayAct = () => state.status === "open" || holdsIt();

    const shotTitle = $("shot-title").textContent;
    function holderText() {
      if (state.takeover) return "You took over · the agent waits until you hand back";
      if (state.answeredByUser) return `Answered by the user: “${state.answer}” · nothing left to do`;
      if (state.status === "resolved") {
        return `Ticket resolved (${state.decision || "done"}` +
          (state.resolvedBy ? ` by ${state.resolvedBy === me ? "you" : state.resolvedBy})` : ")");
      }
      if (state.status === "cancelled") return "Ticket cancelled: the task has ended";
      return `Ticket ${state.status}` +
        (state.assignee ? ` · held by ${state.assignee === me ? "you" : state.assignee}` : "");
    }
    function refresh() {
      const held = state.status === "claimed" && state.assignee && state.assignee !== me;
      $("holder").textContent = holderText();
      $("holder").classList.toggle("held-other", !!held);
      $("claim").hidden = state.status !== "open";
      $("release").hidden = !holdsIt();
      ["approve", "edit", "abort", "takeover", "send-edit"].forEach((id) => {
        if ($(id)) $(id).disabled = state.busy || !(isOpen() && mayAct());
      });
      const answerForm = $("answer-form");
      if (answerForm) {
        answerForm.querySelector("button").disabled = state.busy || !(isOpen() && mayAct());
        answerForm.hidden = !isOpen();
      }
      if ($("escalated")) $("escalated").hidden = !isOpen();  // answered: not waiting any more
      if ($("answer-options")) $("answer-options").hidden = !isOpen();
      document.querySelectorAll("button.quick-reply").forEach((b) => { b.disabled = state.busy || !(isOpen() && mayAct()); });
      if ($("approve")) $("approve").hidden = !isOpen();
      if ($("edit")) $("edit").hidden = !isOpen();
      $("takeover").hidden = !isOpen();
      $("handback").hidden = !state.takeover;
      $("abort").hidden = !(isOpen() || state.takeover);
      $("abort").disabled = state.busy || !((isOpen() && mayAct()) || state.takeover);
      $("live").hidden = !state.takeover;
      // In control, A / E / T mean nothing: the keys go to the phone.
      $("key-hints").hidden = state.takeover || !isOpen();
      // In control, the live phone takes the place of the step's (now stale) screenshot.
      if ($("shot")) $("shot").hidden = state.takeover;
      $("shot-title").textContent = state.takeover ? "Live screen — you control the phone" : shotTitle;
      $("task-status").textContent = state.taskStatus.replace("_", " ");
      $("task-status").className = "status s-" + state.taskStatus;
      if (!isOpen() && state.editing) setEditing(false);
    }

    // Count what this page learned of the ticket and of the task, apart (events, its own
    // actions' answers): a catch-up read on its way meanwhile is older than that, for
    // that part only (see open below).
    const learned = {ticket: 0, task: 0};
    function apply(t) {
      learned.ticket += 1;
      state.status = t.status;
      state.assignee = t.assignee || "";
      state.decision = t.decision || "";
      state.resolvedBy = t.resolved_by || "";
      state.answer = t.answer || "";
      state.answeredByUser = !!t.answered_by_user;
      refresh();
    }

    async function claim() {
      try { apply(await api("POST", `/tickets/${ticketId}/claim`)); flash(""); return true; }
      catch (e) {
        flash(e.message, true);
        try { apply(await api("GET", `/tickets/${ticketId}`)); } catch (_) { /* shown above */ }
        return false;
      }
    }

    // Opening a ticket only looks at it; a claim is explicit (Claim) or comes with the
    // first action (Edit). While the holder works the page renews the claim; when they
    // leave, close the tab or stay idle past the claim timeout it goes back to the queue.
    const idleLimit = Number(root.dataset.claimTimeout || 300) * 1000;
    let lastActivity = Date.now(), lastRenew = Date.now();
    ["pointerdown", "keydown", "input"].forEach((type) => document.addEventListener(type, () => {
      lastActivity = Date.now();
      if (holdsIt() && Date.now() - lastRenew > Math.min(60000, idleLimit / 3)) {
        lastRenew = Date.now();
        api("POST", `/tickets/${ticketId}/claim`).then(apply).catch(() => {});
      }
    }, true));
    setInterval(async () => {
      if (holdsIt() && !state.busy && Date.now() - lastActivity >= idleLimit) {
        try {
          apply(await api("POST", `/tickets/${ticketId}/release`));
          const span = idleLimit >= 60000 ? `${Math.round(idleLimit / 60000)} min` : `${Math.round(idleLimit / 1000)} s`;
          flash(`Released after ${span} without activity; claim it again to go on.`);
        } catch (_) { /* already gone: the socket tells */ }
      }
    }, Math.min(15000, idleLimit / 4));
    // Reassigning reloads this page: the socket may already have told it that the admin
    // now holds the ticket, and releasing on the way out would free what they just took.
    let reassigning = false;
    if ($("reassign-form")) $("reassign-form").addEventListener("submit", () => { reassigning = true; });
    window.addEventListener("pagehide", () => {
      if (!holdsIt() || state.busy || reassigning) return;
      // keepalive lets the request outlive the page (closing the tab, following a link).
      fetch(`/api/tickets/${ticketId}/release`, {method: "POST", keepalive: true,
        credentials: "same-origin", headers: {"X-CSRFToken": cookie("csrftoken")}});
    });

    async function resolve(decision, extra) {
      if (state.busy) return;
      state.busy = true; refresh();
      try {
        const t = await api("POST", `/tickets/${ticketId}/resolve`, Object.assign({decision}, extra || {}));
        apply(t);
        if (decision === "takeover") {
          state.takeover = true; state.taskStatus = "taken_over"; learned.task += 1;
          flash("You control the phone. Hand back when done.");
          startRemote();
          refresh();
          $("live").scrollIntoView({block: "start"});  // the phone and its keys in view
        } else {
          flash(decision === "abort" ? "Task aborted." : "Done — the agent goes on.");
          await leave(localStorage.getItem("kairos.next") === "1");
        }
      } catch (e) {
        flash(e.message, true);
      } finally { state.busy = false; refresh(); }
    }

    // Back to the queue, or on to the next ticket (after resolving when the operator
    // asked for it on the console, and with the N key).
    async function leave(toNext) {
      let target = null;
      if (toNext) {
        try { target = await nextTicket(me, ticketId); } catch (_) { /* the queue then */ }
      }
      location.href = target ? `/console/tickets/${target.id}/` : "/console/";
    }

    // Edit: point on the screenshot, an element from the list, or the fields.
    function setEditing(on) {
      state.editing = on;
      $("editor").hidden = !on;
      if (shot) $("shot").classList.toggle("editing", on);
      if (on) {
        const a = proposed || {type: "CLICK"};
        $("edit-type").value = a.type || "CLICK";
        $("edit-x").value = a.x ?? ""; $("edit-y").value = a.y ?? "";
        $("edit-text").value = a.text ?? ""; $("edit-direction").value = a.direction || "UP";
        $("edit-app").value = a.app ?? ""; $("edit-element").value = "";
        fields(); preview();
      } else if ($("edit-mark")) $("edit-mark").replaceChildren();
    }
    function fields() {
      const t = $("edit-type").value;
      const show = {"f-point": ["CLICK", "LONG_CLICK"], "f-text": ["TYPE"], "f-direction": ["SCROLL"], "f-app": ["OPENAPP"]};
      Object.entries(show).forEach(([cls, types]) =>
        document.querySelectorAll("." + cls).forEach((n) => { n.hidden = !types.includes(t); }));
    }
    function editedAction() {
      const type = $("edit-type").value;
      const action = {type};
      if (type === "CLICK" || type === "LONG_CLICK") { action.x = parseInt($("edit-x").value, 10); action.y = parseInt($("edit-y").value, 10); }
      if (type === "TYPE") action.text = $("edit-text").value;
      if (type === "SCROLL") action.direction = $("edit-direction").value;
      if (type === "OPENAPP") action.app = $("edit-app").value;
      if ($("edit-element").value && action.x !== undefined) action.element = $("edit-element").value;
      return action;
    }
    function preview() { if ($("edit-mark")) drawAction($("edit-mark"), editedAction(), W, H, "edit"); }

    if (shot) shot.addEventListener("click", (e) => {
      if (!state.editing) return;
      const r = shot.getBoundingClientRect();
      if (!["CLICK", "LONG_CLICK"].includes($("edit-type").value)) $("edit-type").value = "CLICK";
      $("edit-x").value = Math.min(W - 1, Math.round((e.clientX - r.left) / r.width * W));
      $("edit-y").value = Math.min(H - 1, Math.round((e.clientY - r.top) / r.height * H));
      $("edit-element").value = "";
      fields(); preview();
    });
    document.querySelectorAll("button.element").forEach((b) => b.addEventListener("click", () => {
      if (!["CLICK", "LONG_CLICK"].includes($("edit-type").value)) $("edit-type").value = "CLICK";
      $("edit-x").value = b.dataset.x; $("edit-y").value = b.dataset.y; $("edit-element").value = b.dataset.key;
      document.querySelectorAll("button.element").forEach((o) => o.classList.toggle("picked", o === b));
      fields(); preview();
    }));
    ["edit-type", "edit-x", "edit-y", "edit-text", "edit-direction", "edit-app"].forEach((id) =>
      $(id).addEventListener("input", () => { fields(); preview(); }));
    $("editor").addEventListener("submit", (e) => { e.preventDefault(); resolve("edit", {action: editedAction()}); });
    $("cancel-edit").addEventListener("click", () => setEditing(false));

    // Take-over: the live screen becomes a remote control over the screen socket.
    let remote = null;
    function startRemote() {
      if (remote) return;
      const img = $("live-img");
      remote = screenStream(root.dataset.deviceId, [img]);
      remote.onInput = (msg) => {
        flash(`Sent ${describe(msg.action)} — screen ${msg.changed ? "changed" : "unchanged"}.`);
        addTimeline(msg);
      };
      const screen = $("live-screen");
      let down = null;
      // The point is mapped from where the image is drawn at the moment of the event,
      // before anything (focus, a layout shift) can move it; with object-fit: contain the
      // frame may be letterboxed inside the <img> box, so the drawn frame is used.
      const toDevice = (e) => {
        const w = remote.meta.width || img.naturalWidth || 1080;
        const h = remote.meta.height || img.naturalHeight || 2400;
        const r = img.getBoundingClientRect();
        const scale = Math.min(r.width / w, r.height / h);
        const left = r.left + (r.width - w * scale) / 2, top = r.top + (r.height - h * scale) / 2;
        return {x: Math.max(0, Math.min(w - 1, Math.round((e.clientX - left) / scale))),
                y: Math.max(0, Math.min(h - 1, Math.round((e.clientY - top) / scale)))};
      };
      screen.addEventListener("pointerdown", (e) => {
        e.preventDefault();
        const p = toDevice(e);
        screen.focus({preventScroll: true});  // focusing must not scroll the page under the finger
        down = {e, at: Date.now(), p};
      });
      screen.addEventListener("pointerup", (e) => {
        if (!down) return;
        const dx = e.clientX - down.e.clientX, dy = e.clientY - down.e.clientY;
        const held = Date.now() - down.at;
        let action;
        if (Math.hypot(dx, dy) < 12) action = {type: held > 600 ? "LONG_CLICK" : "CLICK", ...down.p};
        else if (Math.abs(dy) >= Math.abs(dx)) action = {type: "SCROLL", direction: dy < 0 ? "UP" : "DOWN"};
        else action = {type: "SCROLL", direction: dx < 0 ? "LEFT" : "RIGHT"};
        down = null;
        send(action);
      });
      // STF-style: with the live screen focused, the keyboard goes to the phone. Printable
      // keys are gathered into one TYPE (a short pause ends it); Enter and Home are keys.
      let typed = "", typedTimer = null;
      const flushTyped = () => {
        clearTimeout(typedTimer);
        if (typed) send({type: "TYPE", text: typed});
        typed = "";
      };
      screen.addEventListener("keydown", (e) => {
        if (e.ctrlKey || e.metaKey || e.altKey) return;
        let handled = true;
        if (e.key.length === 1) {
          typed += e.key;
          clearTimeout(typedTimer);
          typedTimer = setTimeout(flushTyped, 600);
        } else if (e.key === "Enter") { flushTyped(); send({type: "PRESS_ENTER"}); }
        else if (e.key === "Home") { flushTyped(); send({type: "PRESS_HOME"}); }
        else handled = false;
        if (handled) { e.preventDefault(); e.stopPropagation(); }
      });
      document.querySelectorAll(".remote-keys button").forEach((b) =>
        b.addEventListener("click", () => send({type: b.dataset.key})));
      $("type-form").addEventListener("submit", (e) => {
        e.preventDefault();
        const text = $("type-text").value;
        if (text.trim()) { send({type: "TYPE", text}); $("type-text").value = ""; }
      });
    }
    function send(action) {
      flash(`Sending ${describe(action)}…`);
      remote.send({type: "input", action});
    }
    function addTimeline(msg) {
      const list = $("timeline");
      const empty = list.querySelector("li.muted");
      if (empty) empty.remove();
      list.append(el("li", {"data-step": msg.step}, el("span", {}, `#${msg.step + 1} `, el("b", {}, describe(msg.action)), el("span", {class: "muted"}, " by operator"))));
    }
    async function handBack() {
      state.busy = true; refresh();
      try {
        const task = await api("POST", `/tasks/${taskId}/hand_back`);
        state.takeover = false; state.taskStatus = task.status; learned.task += 1;
        flash("Handed back — the agent resumes.");
        location.href = "/console/";
      } catch (e) { flash(e.message, true); }
      finally { state.busy = false; refresh(); }
    }
    // Asks first, in the page (the browser's own prompt blocks every tab and cannot be
    // styled); what the operator writes is the reason the user reads in their chat.
    // (The dialog is shared with the task page: dialogs.js.)
    const abort = window.KairosDialogs.abortDialog((why) => abortNow(why));
    async function abortNow(why) {
      if (isOpen()) return resolve("abort", why.trim() ? {answer: why.trim()} : {});
      state.busy = true; refresh();
      try { const task = await api("POST", `/tasks/${taskId}/abort`); state.takeover = false; applyTaskStatus(task.status); flash("Task aborted."); }
      catch (e) { flash(e.message, true); }
      finally { state.busy = false; refresh(); }
    }

    $("claim").addEventListener("click", claim);
    $("release").addEventListener("click", async () => {
      try { apply(await api("POST", `/tickets/${ticketId}/release`)); } catch (e) { flash(e.message, true); }
    });
    if ($("approve")) $("approve").addEventListener("click", () => resolve("approve"));
    if ($("edit")) $("edit").addEventListener("click", async () => {
      if (!state.editing && state.status === "open" && !(await claim())) return;
      setEditing(!state.editing);
    });
    if ($("answer-form")) $("answer-form").addEventListener("submit", (e) => { e.preventDefault(); resolve("answer", {answer: $("answer").value}); });
    // The same quick replies the user sees in their chat.
    document.querySelectorAll("button.quick-reply").forEach((b) =>
      b.addEventListener("click", () => resolve("answer", {answer: b.dataset.answer})));
    $("takeover").addEventListener("click", () => resolve("takeover"));
    $("handback").addEventListener("click", handBack);
    $("abort").addEventListener("click", abort);

    document.addEventListener("keydown", (e) => {
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      const typing = ["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement.tagName);
      if (e.key === "Escape") { if (state.editing) setEditing(false); if (typing) document.activeElement.blur(); return; }
      if (typing) return;
      const key = e.key.toLowerCase();
      const click = (id) => { const b = $(id); if (b && !b.hidden && !b.disabled) { e.preventDefault(); b.click(); } };
      if (key === "a") click("approve");
      else if (key === "e") click("edit");
      else if (key === "t") click("takeover");
      else if (key === "n" && !state.takeover && !state.busy) { e.preventDefault(); leave(true); }
    });

    // The user's chat, live, and a way to write to them.
    function appendChat(m) {
      const list = $("chat");
      if (list.querySelector(`[data-message-id="${m.id}"]`)) return;
      const empty = list.querySelector("li.empty");
      if (empty) empty.remove();
      const who = m.sender === "user" ? (m.author || "user")
        : m.sender === "operator" ? `Operator ${m.author || ""}`.trim()
        : m.sender === "agent" ? "Agent" : "System";
      const item = el("li", {class: "from-" + m.sender, "data-message-id": m.id},
        el("b", {}, who), " ", el("span", {class: "text"}, m.text),
        ...(m.options && m.options.length ? [" ", el("span", {class: "muted"}, `[${m.options.join(" · ")}]`)] : []));
      // In the order they were written: one missed while the socket was down comes in
      // with the catch-up, after newer ones (message ids grow).
      const later = [...list.querySelectorAll("li[data-message-id]")].find(
        (li) => Number(li.dataset.messageId) > Number(m.id));
      list.insertBefore(item, later || null);
      list.scrollTop = list.scrollHeight;
    }
    if ($("ask-form")) $("ask-form").addEventListener("submit", async (e) => {
      e.preventDefault();
      const options = $("ask-options").value.split(",").map((o) => o.trim()).filter(Boolean);
      try {
        appendChat(await api("POST", `/tickets/${ticketId}/ask`, {question: $("ask-question").value, options}));
        $("ask-question").value = ""; $("ask-options").value = "";
        flash("Asked the user; their reply answers this ticket.");
      } catch (err) { flash(err.message, true); }
    });
    $("message-form").addEventListener("submit", async (e) => {
      e.preventDefault();
      const text = $("message-text").value;
      try {
        appendChat(await api("POST", `/tasks/${taskId}/messages`, {text}));
        $("message-text").value = "";
      } catch (err) { flash(err.message, true); }
    });
    // The page is drawn with its buttons disabled and its key hints hidden: a click or a
    // key before this script had bound them did nothing, silently. Now that they work,
    // refresh() (at the end) enables what the ticket's state allows; these two forms
    // work whatever it is (the chat closes with the task, as the server drew it).
    if ($("ask-send")) $("ask-send").disabled = false;
    $("message-form").querySelector("button").disabled = $("message-text").disabled;

    function applyTaskStatus(status) {
      learned.task += 1;
      state.taskStatus = status;
      // A take-over that lapsed (or an admin handed back) ends control on this page too.
      if (state.takeover && status !== "taken_over") {
        state.takeover = false;
        flash("Your take-over has ended: the task went back to the queue.", true);
      }
      refresh();
    }

    // Others' claims and resolutions show up here too. The page was drawn from the
    // database before its socket joined the operators' group, and a socket that drops
    // misses what happens until it is back: what happened in between (the user answering
    // the question, someone claiming or resolving the ticket) comes only by asking. So
    // on every open — after the server has joined the group — the page reads the task
    // (its status, this ticket, the chat) once. An event or an answer to this page's own
    // action that comes while that read is on its way is newer than it: the read must
    // not undo it (as on the queue), and the events go on arriving. Ticket and task are
    // judged apart: a task event meanwhile (the agent going on after the user answered)
    // says nothing of the ticket, and dropping the ticket's part too left the page at
    // "Ticket open" for good when the answer's own event had come before the socket
    // joined (issue 23.8).
    liveSocket("/ws/operator/", {
      async open() {
        const before = Object.assign({}, learned);
        let task;
        try { task = await api("GET", `/tasks/${taskId}`); }
        catch (_) { return; }  // the events still arrive; the next open reads again
        (task.messages || []).forEach(appendChat);
        const ticket = (task.tickets || []).find((t) => t.id === ticketId);
        if (ticket && learned.ticket === before.ticket) apply(ticket);
        if (learned.task === before.task) applyTaskStatus(task.status);
      },
      json(msg) {
        if (msg.type === "chat.message" && msg.task === taskId) appendChat(msg.message);
        if (msg.ticket && msg.ticket.id === ticketId && msg.type !== "ticket.opened") apply(msg.ticket);
        if (msg.type === "task.updated" && msg.task.id === taskId) applyTaskStatus(msg.task.status);
      },
    });

    refresh();
    if (state.takeover) { startRemote(); $("live").scrollIntoView({block: "start"}); }
  }

  window.Kairos = {initConsole, initTicket, api, drawAction};
})();
