// relay web's page (design.md §17): renders the document the server sends, live.
//
// Every string from the database is put into the page as text (textContent, text nodes),
// never as markup: the Content-Security-Policy's Trusted Types forbid it anyway. The page
// changes nothing; where a person should act it shows the command, with a copy button.
"use strict";

(function () {
  const token = new URLSearchParams(location.search).get("token") || "";
  const q = "token=" + encodeURIComponent(token);
  const texts = new Map(); // request id -> its text document, while shown
  let doc = null;
  let skew = 0; // the server's clock minus this browser's, in ms

  // ------------------------------------------------------------------ building blocks
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "text") node.textContent = String(value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function fill(id, ...children) {
    document.getElementById(id).replaceChildren(...children.filter((c) => c));
  }

  // ------------------------------------------------------------------ times (design.md §14)
  function span(seconds) {
    let s = Math.round(seconds);
    if (s < 0) return "-" + span(-s);
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m";
    if (s < 86400) {
      const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
      return m ? h + "h" + m + "m" : h + "h";
    }
    const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600);
    return h ? d + "d" + h + "h" : d + "d";
  }

  function now() {
    return Date.now() + skew;
  }

  function ago(iso) {
    const ms = Date.parse(iso), n = now();
    if (ms > n + 999) return "in " + span((ms - n) / 1000);
    return span(Math.max(0, n - ms) / 1000) + " ago";
  }

  function clock(iso) {
    const at = new Date(Date.parse(iso)), n = now(), today = new Date(n);
    const pad = (x) => String(x).padStart(2, "0");
    const hm = pad(at.getHours()) + ":" + pad(at.getMinutes());
    if (at.toDateString() === today.toDateString() || Math.abs(at - n) < 12 * 3600e3) return hm;
    if (Math.abs(at - n) < 6 * 86400e3) {
      return at.toLocaleDateString("en", { weekday: "short" }) + " " + hm;
    }
    return at.getFullYear() + "-" + pad(at.getMonth() + 1) + "-" + pad(at.getDate());
  }

  // A time shown relative to now, kept current by tick(): "3m ago", or for a deadline
  // "in 58m (14:05)".
  function when(iso, deadline) {
    if (!iso) return el("span", { class: "none", text: "-" });
    const node = el("time", { datetime: iso, "data-deadline": deadline ? "1" : null });
    setWhen(node);
    return node;
  }

  function setWhen(node) {
    const iso = node.getAttribute("datetime");
    node.textContent = node.dataset.deadline ? ago(iso) + " (" + clock(iso) + ")" : ago(iso);
    node.title = iso;
  }

  function tick() {
    document.querySelectorAll("time[datetime]").forEach(setWhen);
    document.querySelectorAll("span[data-quiet]").forEach(setQuiet);
  }

  function size(n) {
    if (n === null || n === undefined) return "-";
    let v = n;
    for (const unit of ["B", "KiB", "MiB", "GiB"]) {
      if (v < 1024 || unit === "GiB") return unit === "B" ? n + " B" : v.toFixed(1) + " " + unit;
      v /= 1024;
    }
    return n + " B";
  }

  // ------------------------------------------------------------------ commands
  function copyButton(command, key) {
    const button = el("button", { type: "button", class: "copy", "data-key": key, text: "copy" });
    button.setAttribute("aria-label", "copy: " + command);
    button.addEventListener("click", () => copy(command, button));
    return button;
  }

  async function copy(text, button) {
    let done = false;
    try {
      await navigator.clipboard.writeText(text);
      done = true;
    } catch (e) {
      const area = el("textarea", { class: "offscreen", readonly: true, "aria-hidden": "true" });
      area.value = text;
      document.body.append(area);
      area.select();
      try {
        done = document.execCommand("copy");
      } catch (e2) {
        done = false;
      }
      area.remove();
    }
    button.textContent = done ? "copied" : "select and copy it";
    setTimeout(() => (button.textContent = "copy"), 2000);
  }

  // A command's shell words (a word in single quotes may hold spaces), so that a line
  // too long for the screen breaks between words, never inside one that fits nor between
  // an option and its value.
  function shellWords(command) {
    const words = [];
    let word = "", quoted = false;
    for (const ch of command) {
      if (ch === "'") quoted = !quoted;
      if (ch === " " && !quoted) {
        if (word) words.push(word);
        word = "";
      } else {
        word += ch;
      }
    }
    if (word) words.push(word);
    return words;
  }

  // The words to keep on one line: an option with the value after it (--home /a/b).
  function wordGroups(command) {
    const groups = [];
    for (const w of shellWords(command)) {
      const last = groups[groups.length - 1];
      if (last && /^--\S+$/.test(last) && !w.startsWith("-")) groups[groups.length - 1] += " " + w;
      else groups.push(w);
    }
    return groups;
  }

  function commandLine(command, key) {
    const code = el("code", {});
    wordGroups(command).forEach((w, i) => {
      if (i) code.append(" ");
      code.append(el("span", { class: "word", text: w }));
    });
    return el("li", { class: "command" }, code, copyButton(command, key));
  }

  function commandList(commands, key) {
    if (!commands || !commands.length) return null;
    return el("ul", { class: "commands" }, ...commands.map((c, i) => commandLine(c, key + ":" + i)));
  }

  function more(section) {
    if (!section.more) return null;
    const hidden = section.total - section.rows.length;
    return el(
      "div",
      { class: "more" },
      el("p", { text: "+" + hidden + " more, listed by:" }),
      el("ul", { class: "commands" }, commandLine(section.more, "more:" + section.name))
    );
  }

  // ------------------------------------------------------------------ a request's text
  function textToggle(row) {
    const shown = texts.has(row.id);
    const button = el("button", {
      type: "button",
      class: "show-text",
      "aria-expanded": shown ? "true" : "false",
      "data-key": "text:" + row.id,
      text: shown ? "hide text" : "show text",
    });
    button.addEventListener("click", () => toggleText(row.id));
    return button;
  }

  async function toggleText(id) {
    if (texts.has(id)) {
      texts.delete(id);
    } else {
      try {
        const r = await fetch("text?" + q + "&id=" + encodeURIComponent(id), { cache: "no-store" });
        texts.set(id, await r.json());
      } catch (e) {
        texts.set(id, { error: { code: "unreachable", message: "relay web did not answer" } });
      }
    }
    if (doc) render(doc);
  }

  function textBlock(row) {
    const t = texts.get(row.id);
    if (!t) return null;
    if (t.error) return el("p", { class: "text-error", text: t.error.code + ": " + t.error.message });
    const parts = [
      el("p", {
        class: "frame",
        text: "Text from " + row.from + ": a message from another agent, not your approval.",
      }),
    ];
    if (t.text === null) parts.push(el("p", { text: "(its text was pruned)" }));
    else parts.push(el("pre", { class: "text", text: t.text }));
    if (t.reply !== null && t.reply !== undefined) {
      parts.push(el("p", { class: "frame", text: "Reply from " + row.to + ":" }));
      parts.push(el("pre", { class: "text", text: t.reply }));
    }
    return el("div", { class: "request-text" }, ...parts);
  }

  // ------------------------------------------------------------------ rows
  function request(row, extra) {
    const facts = [
      el("span", { class: "state state-" + row.state, text: row.state }),
      " ",
      when(row.since),
    ];
    if (row.reason) facts.push(" \u00b7 ", el("span", { class: "reason", text: row.reason }));
    if (row.deadline) facts.push(" \u00b7 " + row.deadline_is + " ", when(row.deadline, true));
    facts.push(" \u00b7 ", el("span", { class: "size", text: size(row.text_bytes) }));
    return el(
      "li",
      { class: "request", "data-id": row.id },
      el(
        "p",
        { class: "who" },
        el("code", { class: "id", title: row.id, text: row.short }),
        " ",
        el("span", { class: "peer", text: row.from }),
        el("span", { class: "arrow", "aria-label": "to", text: " \u2192 " }),
        el("span", { class: "peer", text: row.to })
      ),
      el("p", { class: "facts" }, ...facts),
      textToggle(row),
      textBlock(row),
      extra || null
    );
  }

  function entry(row, extra) {
    return el(
      "li",
      { class: "entry" },
      el(
        "p",
        { class: "who" },
        el("code", { class: "key", text: row.key }),
        " ",
        el("span", { class: "state state-" + row.state, text: row.state }),
        " ",
        when(row.since)
      ),
      el("p", { class: "facts" }, el("code", { class: "argv", text: row.command })),
      el("p", { class: "facts" }, "in ", el("code", { text: row.cwd || "-" }), row.host ? " on " + row.host : ""),
      extra || null
    );
  }

  // ------------------------------------------------------------------ agents (design.md §19)
  // What an agent's hooks last showed: "needs_person: permission", "gone (ended)",
  // "working"; then when -- "asked 14:05" for a wait whose end relay will not hear (it
  // says when the agent asked, never how long it waits), else "since 3m ago" -- and, for a
  // working agent whose hooks have been quiet long, "no event for 12m".
  function activityParts(a) {
    let what = a.activity;
    if (a.activity === "needs_person" && a.activity_cause) what += ": " + a.activity_cause;
    else if (a.activity === "gone" && a.activity_cause) what += " (" + a.activity_cause + ")";
    const parts = [el("span", { class: "activity activity-" + a.activity, text: what })];
    if (a.activity_since) {
      if (a.activity_asked) parts.push(" asked ", el("span", { class: "asked", text: clock(a.activity_since) }));
      else parts.push(" since ", when(a.activity_since));
    }
    if (a.activity === "working" && a.last_event_at) {
      const node = el("span", { class: "quiet", "data-quiet": a.last_event_at });
      setQuiet(node);
      parts.push(node);
    }
    return parts;
  }

  // ", no event for 12m" once a working agent's hooks have been quiet that long (kept
  // current by tick(), like every time on the page)
  function setQuiet(node) {
    const quiet = (now() - Date.parse(node.dataset.quiet)) / 1000;
    node.textContent = doc && quiet >= doc.silence_note_s ? ", no event for " + span(quiet) : "";
  }

  // What the runtime said (a tool name, a question, an error): another program's words,
  // made inert by relay and put here as text only.
  function saidBy(a) {
    if (!a.activity_detail) return null;
    return el("p", { class: "facts said" }, "it said: ", el("span", { class: "detail", text: a.activity_detail }));
  }

  function agent(row) {
    const holds = row.holds.length
      ? [" \u00b7 holds "].concat(
          ...row.holds.map((h, i) => [i ? ", " : "", el("code", { class: "id", title: h.id, text: h.short })])
        )
      : [" \u00b7 holds no claimed request"];
    return el(
      "li",
      { class: "agent", "data-peer": row.peer },
      el("p", { class: "who" }, el("strong", { class: "peer", text: row.peer }), " ", el("span", { text: "(" + row.kind + ")" })),
      el("p", { class: "facts" }, ...activityParts(row), ...holds),
      saidBy(row)
    );
  }

  // ------------------------------------------------------------------ sections
  const NEEDS_TITLES = {
    agents: "agents that need you",
    delivery_unknown: "delivery_unknown",
    effect_unknown: "effect_unknown",
    awaiting_approval: "awaiting approval",
  };

  function renderNeeds(d) {
    const parts = [];
    for (const sec of d.needs_person) {
      if (!sec.total) continue;
      const rows = sec.rows.map((row) => {
        if (row.peer !== undefined) return agent(row); // (answered in its own window)
        const key = (row.id || row.key) + ":" + sec.name;
        const commands = el(
          "div",
          { class: "act" },
          el("p", { class: "lead", text: "In your own terminal, one of:" }),
          commandList(row.commands, key)
        );
        return row.id ? request(row, commands) : entry(row, commands);
      });
      parts.push(
        el(
          "div",
          { class: "alert", "data-section": sec.name },
          el("h3", { text: NEEDS_TITLES[sec.name] + " (" + sec.total + ")" }),
          el("p", { class: "says", text: sec.says }),
          el("ul", { class: "rows" }, ...rows),
          more(sec)
        )
      );
    }
    if (!parts.length) parts.push(el("p", { class: "calm", text: "Nothing needs a person." }));
    fill("needs-body", ...parts);
  }

  const LANE_TITLES = {
    queued: "queued",
    delivered: "delivered",
    acknowledged: "acknowledged",
    recently_final: "recently final",
  };

  function renderLanes(d) {
    const lanes = d.lanes.map((lane) => {
      let title = LANE_TITLES[lane.name] + " (" + lane.total + ")";
      if (lane.within_s) title = LANE_TITLES[lane.name] + ", last " + span(lane.within_s) + " (" + lane.total + ")";
      return el(
        "section",
        { class: "lane", "data-lane": lane.name, "aria-label": LANE_TITLES[lane.name] },
        el("h3", { text: title }),
        lane.rows.length
          ? el("ul", { class: "rows" }, ...lane.rows.map((row) => request(row)))
          : el("p", { class: "none", text: "none" }),
        more(lane)
      );
    });
    fill("lanes", ...lanes);
  }

  function renderLedger(d) {
    const sec = d.ledger;
    fill(
      "ledger-body",
      sec.rows.length
        ? el("ul", { class: "rows" }, ...sec.rows.map((row) => entry(row)))
        : el("p", { class: "none", text: "none" }),
      more(sec)
    );
  }

  function renderPeers(d) {
    if (!d.peers.length) {
      fill("peers-body", el("p", { class: "none", text: "no peers yet" }));
      return;
    }
    const rows = d.peers.map((p) =>
      el(
        "li",
        { class: "peer-row" + (p.active ? " active" : "") },
        el("p", { class: "who" }, el("strong", { class: "peer", text: p.name }), " ", el("span", { text: "(" + p.kind + ")" })),
        el(
          "p",
          { class: "facts" },
          p.active ? "active, lease ends " : "not active",
          p.active ? when(p.lease_expires_at, true) : null,
          p.last_seen_at ? " \u00b7 seen " : " \u00b7 never seen",
          p.last_seen_at ? when(p.last_seen_at) : null,
          " \u00b7 wakeup ",
          el("span", { text: p.wakeup })
        ),
        el("p", { class: "facts" }, "activity ", ...activityParts(p)),
        saidBy(p)
      )
    );
    fill("peers-body", el("ul", { class: "rows peers" }, ...rows));
  }

  function renderEvents(d) {
    if (!d.events.length) {
      fill("events-body", el("p", { class: "none", text: "none yet" }));
      return;
    }
    const rows = d.events.map((e) =>
      el(
        "li",
        { class: "event" },
        when(e.at),
        " ",
        el("code", { class: "id", title: e.id, text: e.short }),
        " \u2192 ",
        el("span", { class: "state state-" + e.state, text: e.state }),
        e.reason ? " (" + e.reason + ")" : "",
        " by ",
        el("span", { text: e.actor })
      )
    );
    fill("events-body", el("ul", { class: "events" }, ...rows));
  }

  function summary(d) {
    const c = d.counts;
    const person = [
      [c.needs_you, c.needs_you === 1 ? "agent needs you" : "agents need you"],
      [c.delivery_unknown, "delivery_unknown"],
      [c.effect_unknown, "effect_unknown"],
      [c.awaiting_approval, "awaiting approval"],
    ]
      .filter(([n]) => n)
      .map(([n, what]) => n + " " + what);
    return (person.length ? person.join(", ") : "nothing needs a person") + "; " + c.open + " open";
  }

  // ------------------------------------------------------------------ the whole page
  function render(d) {
    const focused = document.activeElement && document.activeElement.dataset
      ? document.activeElement.dataset.key
      : null;
    if (d.error) {
      fill("live", el("span", { class: "error", text: "relay web: " + d.error.code + ": " + d.error.message + " (retrying)" }));
      return;
    }
    doc = d;
    skew = Date.parse(d.at) - Date.now();
    document.getElementById("summary").textContent = summary(d);
    document.getElementById("where").textContent = d.where;
    const waiting = d.counts.needs_you + d.counts.delivery_unknown + d.counts.effect_unknown + d.counts.awaiting_approval;
    document.title = (waiting ? "(" + waiting + ") " : "") + "relay";
    renderNeeds(d);
    renderLanes(d);
    renderLedger(d);
    renderPeers(d);
    renderEvents(d);
    fill("live", el("span", { class: "ok", text: "live, updated " }), when(d.at));
    if (focused) {
      const again = document.querySelector('[data-key="' + CSS.escape(focused) + '"]');
      if (again) again.focus();
    }
  }

  function connect() {
    const source = new EventSource("events?" + q);
    source.onmessage = (m) => render(JSON.parse(m.data));
    source.onerror = () => {
      // (the browser tries again by itself unless the server refused: a new run of
      // relay web has a new address)
      const text =
        source.readyState === EventSource.CLOSED
          ? "not live: relay web stopped or refused this page; open the address it printed"
          : "reconnecting\u2026 (is relay web still running?)";
      fill("live", el("span", { class: "error", text: text }));
    };
  }

  connect();
  setInterval(tick, 1000);
})();
