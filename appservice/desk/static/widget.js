// The desk widget: no build step, no framework. It talks to the desk's public API (Chatwoot-shaped) as one
// contact, kept in this browser (localStorage), and reads the conversation's event stream (EventSource resumes
// with Last-Event-ID by itself). Every word a person reads comes from the site's strings (### desk) and every
// text from the server is set as text, never as HTML. The commands the contact may run here are a menu, each
// command's fields drawn as controls by their kind.
(function () {
  "use strict";

  const inboxId = document.body.dataset.inbox;
  const base = "/public/api/v1/inboxes/" + encodeURIComponent(inboxId);
  const storeKey = "summon-desk:" + inboxId;
  const $ = (id) => document.getElementById(id);
  const ui = {
    bubble: $("summon-bubble"), panel: $("summon-panel"), close: $("summon-close"), title: $("summon-title"),
    person: $("summon-person"), log: $("summon-log"), typing: $("summon-typing"), check: $("summon-check"),
    checkWords: $("summon-check-words"), checkButtons: $("summon-check-buttons"), error: $("summon-error"),
    form: $("summon-form"), input: $("summon-input"), send: $("summon-send"),
    commands: $("summon-commands"), commandsToggle: $("summon-commands-toggle"),
  };

  let words = {};
  let me = null;            // {source_id, token, token_expires_at, conversation}
  let conversation = null;  // the conversation as last shown
  let stream = null;
  const shown = new Map();  // message id -> its element
  let personAnswered = false;
  let assistant = true;     // whether one of the site's bots can answer here (none: a person answers)
  let commands = [];        // the commands this contact may run here

  // --- the API ------------------------------------------------------------------------------------------

  async function call(method, path, body) {
    const headers = {"Content-Type": "application/json"};
    if (me) headers.Authorization = "Bearer " + me.token;
    const resp = await fetch(base + path, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
    const data = await resp.json().catch(() => ({}));
    if (!resp.ok) {
      const err = new Error(data.error || ("HTTP " + resp.status));
      err.status = resp.status;
      throw err;
    }
    return data;
  }

  const contactPath = () => "/contacts/" + encodeURIComponent(me.source_id);
  const conversationPath = () => contactPath() + "/conversations/" + conversation.id;

  function save() { localStorage.setItem(storeKey, JSON.stringify(me)); }

  async function ensureContact() {
    try { me = JSON.parse(localStorage.getItem(storeKey) || "null"); } catch (e) { me = null; }
    const now = Date.now() / 1000;
    if (me && me.token_expires_at && me.token_expires_at - now < 7 * 86400) {
      try {
        const renewed = await call("POST", contactPath() + "/token");
        me.token = renewed.pubsub_token; me.token_expires_at = renewed.token_expires_at; save();
      } catch (e) { if (e.status === 401 || e.status === 404) me = null; }
    }
    if (!me) {
      const made = await call("POST", "/contacts", {});
      me = {source_id: made.source_id, token: made.pubsub_token, token_expires_at: made.token_expires_at};
      save();
    }
  }

  async function ensureConversation() {
    if (me.conversation) {
      try {
        conversation = await call("GET", contactPath() + "/conversations/" + me.conversation);
        return;
      } catch (e) {
        if (e.status !== 404) throw e;
      }
    }
    conversation = await call("POST", contactPath() + "/conversations", {});
    me.conversation = conversation.id; save();
  }

  // --- drawing ------------------------------------------------------------------------------------------

  function say(key) { return words[key] || ""; }

  function whoSaid(m) {
    if (!m.sender) return "";
    return m.sender.name || "";
  }

  function draw(m) {
    if (m.private) return;
    let li = shown.get(m.id);
    const fresh = !li;
    if (fresh) {
      li = document.createElement("li");
      li.dataset.id = String(m.id);
      shown.set(m.id, li);
      ui.log.appendChild(li);
    }
    li.className = "msg " + m.message_type + (m.status === "failed" ? " failed" : "");
    if (m.bot) li.classList.add("bot");
    li.replaceChildren();
    const who = whoSaid(m);
    if (who && m.message_type !== "activity" && m.message_type !== "incoming") {  // their own need no name
      const span = document.createElement("span");
      span.className = "who";
      span.textContent = who;
      li.appendChild(span);
    }
    const text = document.createElement("span");
    text.className = "text";
    text.textContent = m.content;
    li.appendChild(text);
    const attrs = m.content_attributes || {};
    if (Array.isArray(attrs.links) && attrs.links.length) {
      const links = document.createElement("div");
      links.className = "links";
      for (const link of attrs.links) {
        if (!/^https?:\/\//i.test(link.url || "")) continue;
        const a = document.createElement("a");
        a.href = link.url; a.textContent = link.title; a.target = "_blank"; a.rel = "noopener noreferrer";
        links.appendChild(a);
      }
      li.appendChild(links);
    }
    if (m.content_type === "input_select" && Array.isArray(attrs.items)) {
      const taken = (attrs.submitted_values || []).map((v) => v.value);
      const gone = taken.length > 0 || attrs.withdrawn;
      const box = document.createElement("div");
      box.className = "choices";
      box.setAttribute("role", "group");
      for (const item of attrs.items) {
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = item.title;
        b.disabled = Boolean(gone);
        if (taken.includes(item.value)) b.classList.add("taken");
        b.addEventListener("click", () => press(m, item.value, box));
        box.appendChild(b);
      }
      li.appendChild(box);
    }
    if (m.sender && m.sender.type === "user") personAnswered = true;
    if (fresh) ui.log.scrollTop = ui.log.scrollHeight;
  }

  function drawState() {
    // "Talk to a person" is offered while a bot has the conversation and no person has answered yet.
    const botHasIt = conversation && conversation.status === "pending" && !conversation.bot_off;
    ui.person.hidden = !assistant || !botHasIt || personAnswered;
    ui.person.textContent = say("human");
  }

  function showError(text) {
    ui.error.textContent = text;
    ui.error.hidden = !text;
  }

  // --- did that help? (only for an answer the person watched arrive) --------------------------------------

  function check(answer) {
    ui.checkWords.textContent = say("did_it_help");
    ui.checkButtons.replaceChildren(
      button(say("helped"), async () => {
        await feedback(answer, true);
        anythingElse();
      }),
      button(say("human"), async () => {
        hideCheck();
        await feedback(answer, false);
      }),
    );
    ui.check.hidden = false;
  }

  function anythingElse() {
    ui.checkWords.textContent = say("anything_else");
    ui.checkButtons.replaceChildren(
      button(say("more"), () => { hideCheck(); ui.input.focus(); }),
      button(say("done"), async () => {
        hideCheck();
        await guarded(() => call("POST", conversationPath() + "/toggle_status", {status: "resolved"}));
      }),
    );
    ui.check.hidden = false;
    ui.checkButtons.querySelector("button").focus();
  }

  function hideCheck() { ui.check.hidden = true; ui.checkButtons.replaceChildren(); }

  function button(label, onClick) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.addEventListener("click", onClick);
    return b;
  }

  async function feedback(answer, helped) {
    await guarded(() => call("POST", conversationPath() + "/messages/" + answer.id + "/feedback", {helped}));
  }

  // --- acting -------------------------------------------------------------------------------------------

  async function guarded(fn) {
    try {
      showError("");
      return await fn();
    } catch (e) {
      showError(e.message);
      return null;
    }
  }

  async function press(m, value, box) {
    for (const b of box.querySelectorAll("button")) b.disabled = true;
    const taken = await guarded(() => call("PATCH", conversationPath() + "/messages/" + m.id,
      {submitted_values: [{value}]}));
    if (taken) draw(taken);
  }

  async function send(event) {
    event.preventDefault();
    const content = ui.input.value.trim();
    if (!content) return;
    await open();
    if (!conversation) return;
    hideCheck();
    ui.send.disabled = true;
    const echo = "w" + Date.now().toString(36) + Math.random().toString(36).slice(2, 8);
    const sent = await guarded(() => call("POST", conversationPath() + "/messages", {content, echo_id: echo}));
    ui.send.disabled = false;
    if (sent) {
      ui.input.value = "";
      draw(sent);
    }
    ui.input.focus();
  }

  async function talkToAPerson() {
    hideCheck();
    await guarded(() => call("POST", conversationPath() + "/toggle_status", {status: "open"}));
  }

  // --- commands: a menu, and each command's fields as controls ------------------------------------------------

  const UNITS = [["m", "unit_minutes"], ["h", "unit_hours"], ["d", "unit_days"], ["w", "unit_weeks"]];

  async function loadCommands() {
    const listed = await call("GET", contactPath() + "/commands").catch(() => ({payload: []}));
    commands = listed.payload || [];
    ui.commandsToggle.hidden = commands.length === 0;
    ui.commandsToggle.setAttribute("aria-label", say("commands"));
    ui.commandsToggle.title = say("commands");
  }

  function toggleCommands() {
    if (ui.commands.hidden) showMenu(); else hideCommands();
  }

  function hideCommands() {
    ui.commands.hidden = true;
    ui.commands.replaceChildren();
    ui.commandsToggle.setAttribute("aria-expanded", "false");
  }

  function showMenu() {
    const heading = document.createElement("h3");
    heading.textContent = say("commands");
    const menu = document.createElement("div");
    menu.className = "menu";
    for (const command of commands) {
      const b = button("/" + command.name, () => showForm(command));
      b.dataset.command = command.name;
      if (command.hint) {
        const hint = document.createElement("span");
        hint.className = "hint";
        hint.textContent = command.hint;
        b.appendChild(hint);
      }
      menu.appendChild(b);
    }
    ui.commands.replaceChildren(heading, menu);
    ui.commands.hidden = false;
    ui.commandsToggle.setAttribute("aria-expanded", "true");
    const first = menu.querySelector("button");
    if (first) first.focus();
  }

  // A field's control by its kind: a span as a number and a unit, a choice as a list, a boolean as a switch.
  function control(arg) {
    const id = "summon-arg-" + arg.name;
    const box = document.createElement("div");
    box.className = "field";
    box.dataset.kind = arg.kind;
    const label = document.createElement("label");
    label.htmlFor = id;
    label.textContent = arg.label;
    const row = document.createElement("div");
    row.className = "row";
    let read;
    if (arg.kind === "span") {
      const given = /^([0-9]+)\s*([mhdw])/.exec(arg.default || "");
      const count = input("number", id);
      count.min = "1"; count.step = "1"; count.value = given ? given[1] : "";
      const unit = document.createElement("select");
      unit.setAttribute("aria-label", arg.label);
      for (const [value, key] of UNITS) unit.appendChild(option(value, say(key), given && given[2] === value));
      row.append(count, unit);
      read = () => (count.value ? count.value + unit.value : null);
    } else if (arg.kind === "choice") {
      const list = document.createElement("select");
      list.id = id;
      for (const choice of arg.choices) list.appendChild(option(choice, choice, choice === arg.default));
      row.append(list);
      read = () => list.value;
    } else if (arg.kind === "boolean") {
      const toggle = input("checkbox", id);
      toggle.setAttribute("role", "switch");
      toggle.checked = arg.default === true;
      row.append(toggle);
      read = () => toggle.checked;
    } else {
      const field = input(arg.kind === "number" ? "number" : "text", id);
      if (arg.kind === "number") field.step = "any";
      field.value = arg.default === null || arg.default === undefined ? "" : String(arg.default);
      field.placeholder = arg.accepts || "";
      row.append(field);
      read = () => (field.value.trim() ? field.value.trim() : null);
    }
    box.append(label, row);
    return {box, read};
  }

  function input(type, id) {
    const i = document.createElement("input");
    i.type = type; i.id = id;
    return i;
  }

  function option(value, text, selected) {
    const o = document.createElement("option");
    o.value = value; o.textContent = text; o.selected = Boolean(selected);
    return o;
  }

  function showForm(command) {
    const form = document.createElement("form");
    form.className = "command";
    form.dataset.command = command.name;
    const heading = document.createElement("h3");
    heading.textContent = "/" + command.name;
    form.appendChild(heading);
    const fields = command.args.map((arg) => [arg.name, control(arg)]);
    for (const [, f] of fields) form.appendChild(f.box);
    const actions = document.createElement("div");
    actions.className = "actions";
    const run = document.createElement("button");
    run.type = "submit";
    run.textContent = say("run_command");
    actions.append(button(say("back"), showMenu), run);
    form.appendChild(actions);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const args = {};
      for (const [name, f] of fields) {
        const value = f.read();
        if (value !== null) args[name] = value;
      }
      await open();
      if (!conversation) return;
      run.disabled = true;
      const sent = await guarded(() => call("POST", conversationPath() + "/commands/" + encodeURIComponent(command.name),
        {args}));
      run.disabled = false;
      if (sent) {
        draw(sent);
        hideCommands();
        hideCheck();
        ui.input.focus();
      }
    });
    ui.commands.replaceChildren(form);
    const first = form.querySelector("input, select, button");
    if (first) first.focus();
  }

  // --- the stream -----------------------------------------------------------------------------------------

  function listen() {
    if (stream) stream.close();
    const url = base + conversationPath() + "/events?token=" + encodeURIComponent(me.token) +
      "&last_event_id=" + encodeURIComponent(String(conversation.last_event_id || 0));
    stream = new EventSource(url);
    stream.addEventListener("message_created", (e) => {
      const m = JSON.parse(e.data);
      const fresh = !shown.has(m.id);
      draw(m);
      if (fresh && m.bot && m.message_type === "outgoing" && !m.private) {
        ui.typing.hidden = true;
        check(m);  // an answer watched arriving: a first load sets no check
      }
      drawState();
    });
    stream.addEventListener("message_updated", (e) => { draw(JSON.parse(e.data)); drawState(); });
    stream.addEventListener("conversation_status_changed", (e) => {
      Object.assign(conversation, JSON.parse(e.data));
      if (conversation.bot_off) hideCheck();
      drawState();
    });
    stream.addEventListener("typing", (e) => {
      const t = JSON.parse(e.data);
      ui.typing.textContent = say("typing").replace("{bot}", t.name);
      ui.typing.hidden = !t.on;
    });
  }

  // --- opening and closing ---------------------------------------------------------------------------------

  let ready = null;  // the opening: what a send or a press waits for (one may come before it is done)

  function open() {
    ui.panel.hidden = false;
    ui.bubble.setAttribute("aria-expanded", "true");
    ui.input.focus();
    if (!ready) {
      ready = guarded(async () => {
        const inbox = await call("GET", "");
        words = inbox.words || {};
        assistant = inbox.assistant !== false;
        ui.title.textContent = inbox.name;
        ui.input.placeholder = say("placeholder");
        ui.send.textContent = say("send");
        await ensureContact();
        await ensureConversation();
        await loadCommands();
        for (const m of conversation.messages || []) draw(m);
        drawState();
        listen();
      }).then(() => { if (!conversation) ready = null; });
    }
    return ready;
  }

  function close() {
    ui.panel.hidden = true;
    ui.bubble.setAttribute("aria-expanded", "false");
    ui.bubble.focus();
  }

  ui.bubble.addEventListener("click", () => (ui.panel.hidden ? open() : close()));
  ui.close.addEventListener("click", close);
  ui.panel.addEventListener("keydown", (e) => { if (e.key === "Escape") close(); });
  ui.person.addEventListener("click", talkToAPerson);
  ui.form.addEventListener("submit", send);
  ui.commandsToggle.addEventListener("click", toggleCommands);
  ui.input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); ui.form.requestSubmit(); }
  });
})();
