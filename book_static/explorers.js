// Explorers without a kernel (manyheads.viz.explorers, issue 27). On the book's pages the widget manager draws an
// explorer's saved state, but no Python runs when a control changes. This script does what the kernel would: when a
// control of a box marked "mh-explorer--<name>" changes, it reads every control of that box and writes into its
// view what window.manyheadsExplorers[<name>](values) returns (an HTML string), a JavaScript port of the Python
// function (book_static/head_budget.js for the head-budget calculator). It listens on the document, so explorers
// the widget manager draws later need no binding, and it runs after the control's own handler (the event bubbles
// up to here), so it reads the value the widget kept: an integer box has already clamped it to its bounds.
// Figure explorers (figure_explorer) need no port: the box carries every state of its controls' grid, computed by
// the Python function the kernel runs, and this script draws the one the controls select (section below).
(function () {
  var registry = (window.manyheadsExplorers = window.manyheadsExplorers || {});
  var PREFIX = { explorer: "mh-explorer--", control: "mh-control--", kind: "mh-kind--" };

  function suffix(element, prefix) {
    for (var i = 0; i < element.classList.length; i++) {
      if (element.classList[i].indexOf(prefix) === 0) return element.classList[i].slice(prefix.length);
    }
    return null;
  }

  // How a control of each kind (manyheads.viz.explorers.CONTROL_KINDS) holds its value in the page.
  var READERS = {
    int: function (control) {
      var input = control.querySelector("input");
      var value = input ? parseInt(input.value, 10) : NaN; // what ipywidgets' IntTextView keeps (parseInt)
      return isNaN(value) ? undefined : value;
    },
    float: function (control) {
      var readout = control.querySelector(".widget-readout"); // a slider shows its value there (ipywidgets 7 and 8)
      // ipywidgets 8 formats with d3-format, which writes a minus as U+2212 ("−2.00"), which parseFloat refuses
      var text = readout ? String(readout.textContent || readout.value || "").replace(/\u2212/g, "-") : "";
      var value = parseFloat(text);
      return isNaN(value) ? undefined : value;
    },
    // an integer slider: its readout, as a float slider's (the nearest value of its grid is the one drawn)
    slider: function (control) {
      return READERS.float(control);
    },
    // a selection slider's readout shows the chosen option's label (its position is found among the labels)
    selection: function (control) {
      var readout = control.querySelector(".widget-readout");
      var text = readout ? String(readout.textContent || readout.value || "").trim() : "";
      return text === "" ? undefined : text;
    },
    choice: function (control) {
      var select = control.querySelector("select");
      return select && select.selectedIndex >= 0 ? select.selectedIndex : undefined; // the option's position
    },
  };

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;" }[c];
    });
  }

  function content(box, cls) {
    var part = box.querySelector("." + cls);
    return part && (part.querySelector(".widget-html-content") || part);
  }

  function problem(text) {
    return (
      '<div style="color:#a40000;border-left:4px solid #a40000;padding:4px 8px">' +
      "<b>Could not draw this setting.</b> " + escapeHtml(text) + "</div>"
    );
  }

  function refresh(box) {
    if (box.querySelector(".mh-states-data")) return showState(box);
    var name = suffix(box, PREFIX.explorer);
    var view = content(box, "mh-explorer-view");
    var message = content(box, "mh-explorer-message");
    if (!view || !message) return;
    var values = {};
    var controls = box.querySelectorAll(".mh-control");
    for (var i = 0; i < controls.length; i++) {
      var read = READERS[suffix(controls[i], PREFIX.kind)];
      var value = read ? read(controls[i]) : undefined;
      if (value === undefined) return; // nothing the widget would accept: it keeps its old value, and so do we
      values[suffix(controls[i], PREFIX.control)] = value;
    }
    var port = registry[name];
    if (typeof port !== "function") {
      message.innerHTML = problem("This page cannot compute the explorer " + name + ": run the notebook instead.");
      return;
    }
    try {
      view.innerHTML = port(values);
      message.innerHTML = "";
    } catch (error) {
      message.innerHTML = problem((error && error.name ? error.name + ": " : "") + (error && error.message));
    }
    box.dispatchEvent(new CustomEvent("mh-explorer-drawn", { bubbles: true, detail: { name: name, values: values } }));
  }

  // Figure explorers with stored states (manyheads.viz.explorers.figure_explorer). The box holds every state of its
  // controls' grid (a script of type application/json, class mh-states-data); when a control moves, the state for
  // the controls' grid positions is drawn as SVG in place of the saved picture (drawPanels: what panels_figure draws
  // with matplotlib under a kernel). Sliders change no form field, so their readouts are watched instead.
  var SVG = "http://www.w3.org/2000/svg";
  var statesOf = typeof WeakMap === "function" ? new WeakMap() : null;

  function storedStates(box) {
    var cached = statesOf && statesOf.get(box);
    if (cached) return cached;
    var data = JSON.parse(box.querySelector(".mh-states-data").textContent);
    if (statesOf) statesOf.set(box, data);
    return data;
  }

  function gridIndex(grid, value) {
    var best = -1;
    for (var i = 0; i < grid.length; i++) {
      if (best < 0 || Math.abs(grid[i] - value) < Math.abs(grid[best] - value)) best = i;
    }
    return best;
  }

  function showState(box) {
    var data = storedStates(box);
    var indices = [];
    for (var i = 0; i < data.controls.length; i++) {
      var argument = data.controls[i];
      var control = box.querySelector(".mh-control--" + argument);
      var read = control && READERS[suffix(control, PREFIX.kind)];
      var value = read ? read(control) : undefined;
      if (value === undefined) return;
      // a slider's readout holds its value, a selection slider's its label; a dropdown's position is the grid's
      var kind = suffix(control, PREFIX.kind);
      if (kind === "selection") {
        var position = (data.labels[argument] || []).indexOf(value);
        if (position < 0) return;
        indices.push(position);
      } else {
        indices.push(kind === "choice" ? value : gridIndex(data.grids[argument], value));
      }
    }
    var key = indices.join(",");
    var drawn = box.querySelector(".mh-explorer-drawn");
    if (key === (drawn ? drawn.getAttribute("data-key") : data.initial)) return; // already shown
    var state = data.states[key];
    var message = content(box, "mh-explorer-message");
    if (!state) {
      if (message) message.innerHTML = problem("This page stores no picture for this setting: run the notebook.");
      return;
    }
    var picture = box.querySelector(".mh-explorer-view");
    if (!drawn) {
      drawn = document.createElement("div");
      drawn.className = "mh-explorer-drawn";
      picture.parentNode.insertBefore(drawn, picture.nextSibling);
    }
    picture.style.display = "none";
    drawn.innerHTML = "";
    drawn.appendChild(drawPanels(state));
    drawn.setAttribute("data-key", key);
    if (message) message.innerHTML = "";
    var name = suffix(box, PREFIX.explorer);
    box.dispatchEvent(new CustomEvent("mh-explorer-drawn", { bubbles: true, detail: { name: name, key: key } }));
  }

  function node(parent, tag, attributes, text) {
    var element = document.createElementNS(SVG, tag);
    for (var name in attributes) element.setAttribute(name, attributes[name]);
    if (text !== undefined) element.textContent = text;
    parent.appendChild(element);
    return element;
  }

  function ticks(low, high) {
    var raw = (high - low) / 5;
    var power = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 2.5, 5, 10].map(function (m) { return m * power; }).find(function (s) { return s >= raw; });
    var out = [];
    for (var t = Math.ceil(low / step - 1e-9) * step; t <= high + 1e-9; t += step) out.push(Math.round(t / step) * step);
    return out;
  }

  function label(t) {
    return String(Math.round(t * 1e6) / 1e6).replace("-", "\u2212"); // 0.0025 stays 0.0025
  }

  // One panel in the rectangle (x, y, w, h) of the figure: frame, ticks, labels, title, then the marks.
  function drawPanel(svg, panel, x, y, w, h) {
    var left = x + 62, top = y + 46, width = w - 76, height = h - 46 - (panel.rotate ? 62 : 44);
    var xs, ys, sx, sy;
    if (panel.kind === "bar") {
      var ylim = panel.ylim || [0, Math.max.apply(null, panel.y)];
      sy = function (v) { return top + height * (1 - (v - ylim[0]) / (ylim[1] - ylim[0])); };
      var band = width / panel.x.length;
      sx = function (i) { return left + band * (i + 0.5); };
      ys = ticks(ylim[0], ylim[1]);
      panel.y.forEach(function (v, i) {
        node(svg, "rect", { x: sx(i) - 0.4 * band, width: 0.8 * band, y: Math.min(sy(v), sy(0)),
          height: Math.abs(sy(0) - sy(v)), fill: panel.colors[i] });
      });
      (panel.notes || []).forEach(function (note) {
        node(svg, "text", { x: sx(note[0]), y: sy(note[1]), "text-anchor": "middle", "font-size": 15 }, note[2]);
      });
      panel.x.forEach(function (text, i) {
        var attributes = { x: sx(i), y: top + height + 16, "text-anchor": "middle", "font-size": 13 };
        if (panel.rotate) {
          attributes["text-anchor"] = "end";
          attributes.transform = "rotate(-" + panel.rotate + " " + sx(i) + " " + (top + height + 12) + ")";
          attributes.y = top + height + 12;
        }
        node(svg, "text", attributes, text);
      });
    } else {
      var px = panel.points.map(function (p) { return p[0]; }), py = panel.points.map(function (p) { return p[1]; });
      var x0 = Math.min.apply(null, px), x1 = Math.max.apply(null, px);
      var y0 = Math.min.apply(null, py), y1 = Math.max.apply(null, py);
      var dx = (x1 - x0 || 1) * 0.2, dy = (y1 - y0 || 1) * 0.2;
      x0 -= dx; x1 += dx; y0 -= dy; y1 += dy;
      var scale = Math.min(width / (x1 - x0), height / (y1 - y0)); // equal aspect: the wider range sets the scale
      var cx = (x0 + x1) / 2, cy = (y0 + y1) / 2;
      x0 = cx - width / 2 / scale; x1 = cx + width / 2 / scale; y0 = cy - height / 2 / scale; y1 = cy + height / 2 / scale;
      sx = function (v) { return left + (v - x0) * scale; };
      sy = function (v) { return top + height - (v - y0) * scale; };
      xs = ticks(x0, x1);
      ys = ticks(y0, y1);
      if (x0 < 0 && x1 > 0) node(svg, "line", { x1: sx(0), x2: sx(0), y1: top, y2: top + height, stroke: "#ccc" });
      if (y0 < 0 && y1 > 0) node(svg, "line", { x1: left, x2: left + width, y1: sy(0), y2: sy(0), stroke: "#ccc" });
      panel.points.forEach(function (p, i) {
        node(svg, "circle", { cx: sx(p[0]), cy: sy(p[1]), r: 3.5, fill: panel.colors[i] });
        node(svg, "text", { x: sx(p[0]) + 5.5, y: sy(p[1]) - 5.5 - (panel.rises[i] * 100) / 72, "font-size": 13 },
          panel.labels[i]);
      });
      xs.forEach(function (t) {
        node(svg, "text", { x: sx(t), y: top + height + 16, "text-anchor": "middle", "font-size": 13 }, label(t));
      });
    }
    node(svg, "rect", { x: left, y: top, width: width, height: height, fill: "none", stroke: "#000" });
    ys.forEach(function (t) {
      node(svg, "text", { x: left - 6, y: sy(t) + 4, "text-anchor": "end", "font-size": 13 }, label(t));
    });
    if (panel.xlabel) {
      node(svg, "text", { x: left + width / 2, y: y + h - 6, "text-anchor": "middle", "font-size": 14 }, panel.xlabel);
    }
    if (panel.ylabel) {
      var ly = top + height / 2;
      node(svg, "text", { x: x + 14, y: ly, "text-anchor": "middle", "font-size": 14,
        transform: "rotate(-90 " + (x + 14) + " " + ly + ")" }, panel.ylabel);
    }
    var lines = String(panel.title || "").split("\n");
    lines.forEach(function (line, i) {
      node(svg, "text", { x: left + width / 2, y: top - 8 - 17 * (lines.length - 1 - i), "text-anchor": "middle",
        "font-size": 15 }, line);
    });
  }

  // Colour maps of heatmap panels: manyheads.viz.explorers.COLOUR_MAPS (matplotlib's, sampled at nine stops).
  var COLOUR_MAPS = {
    viridis: ["#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725"],
    Blues: ["#f7fbff", "#deebf7", "#c6dbef", "#9dcae1", "#6aaed6", "#4191c6", "#2070b4", "#08509b", "#08306b"],
  };

  function colourAt(stops, t) {
    var at = Math.max(0, Math.min(1, t)) * (stops.length - 1), i = Math.min(Math.floor(at), stops.length - 2);
    var f = at - i, a = stops[i], b = stops[i + 1], out = "#";
    for (var k = 1; k < 7; k += 2) {
      var v = Math.round(parseInt(a.slice(k, k + 2), 16) * (1 - f) + parseInt(b.slice(k, k + 2), 16) * f);
      out += (v < 16 ? "0" : "") + v.toString(16);
    }
    return out;
  }

  function longest(labels) {
    return labels.reduce(function (m, t) { return Math.max(m, String(t).length); }, 0);
  }

  // A heatmap panel (manyheads.viz.explorers.heatmap_panel): uint8 levels in base64, square cells, tick labels,
  // boxed and crossed cells, and a colour bar on the right.
  function drawHeatmap(svg, panel, x, y, w, h) {
    var rows = panel.shape[0], cols = panel.shape[1], vmin = panel.vmin || 0;
    var vmax = panel.vmax === undefined ? 1 : panel.vmax, spread = vmax - vmin || 1;
    var xt = panel.xticks || [], yt = panel.yticks || [], rotate = panel.rotate || 0;
    var font = 12, charW = 6.6, lines = String(panel.title || "").split("\n");
    var below = (rotate ? longest(xt) * charW * Math.sin((rotate * Math.PI) / 180) : font) + 10 + (panel.xlabel ? 20 : 0);
    var left = x + 8 + (panel.ylabel ? 20 : 0) + longest(yt) * charW, top = y + 12 + 18 * lines.length;
    var barSpace = 64 + (panel.colorbar ? 30 : 0);
    var width = x + w - barSpace - left, height = y + h - below - top;
    var cell = Math.max(1, Math.min(width / cols, height / rows));
    left += (width - cell * cols) / 2; // centred in its place, square cells as imshow's equal aspect
    width = cell * cols; height = cell * rows;
    var raw = atob(panel.values), stops = COLOUR_MAPS[panel.cmap] || COLOUR_MAPS.viridis;
    for (var r = 0; r < rows; r++) {
      for (var c = 0; c < cols; c++) {
        node(svg, "rect", { x: left + c * cell, y: top + r * cell, width: cell + 0.3, height: cell + 0.3,
          fill: colourAt(stops, raw.charCodeAt(r * cols + c) / 255) });
      }
    }
    (panel.boxes || []).forEach(function (b) {
      node(svg, "rect", { x: left + b[1] * cell, y: top + b[0] * cell, width: cell, height: cell, fill: "none",
        stroke: "#fff", "stroke-width": 2.6 });
      node(svg, "rect", { x: left + b[1] * cell, y: top + b[0] * cell, width: cell, height: cell, fill: "none",
        stroke: "#000", "stroke-width": 1 });
    });
    (panel.crosses || []).forEach(function (b) {
      var cx = left + (b[1] + 0.5) * cell, cy = top + (b[0] + 0.5) * cell, d = Math.min(5, cell * 0.35);
      [["#fff", 3], ["#000", 1.3]].forEach(function (pen) {
        node(svg, "path", { d: "M" + (cx - d) + " " + (cy - d) + "L" + (cx + d) + " " + (cy + d) + "M" + (cx - d) + " " +
          (cy + d) + "L" + (cx + d) + " " + (cy - d), stroke: pen[0], "stroke-width": pen[1] });
      });
    });
    node(svg, "rect", { x: left, y: top, width: width, height: height, fill: "none", stroke: "#000" });
    var every = Math.max(1, Math.ceil(font / cell)); // no tick labels drawn over each other
    for (var i = 0; i < cols; i += every) {
      var tx = left + (i + 0.5) * cell, text = xt.length ? xt[i] : String(i);
      var at = { x: tx, y: top + height + 14, "text-anchor": "middle", "font-size": font };
      if (rotate) {
        at["text-anchor"] = "end"; at.y = top + height + 10;
        at.transform = "rotate(-" + rotate + " " + tx + " " + (top + height + 10) + ")";
      }
      node(svg, "text", at, text);
    }
    for (var j = 0; j < rows; j += every) {
      node(svg, "text", { x: left - 5, y: top + (j + 0.5) * cell + 4, "text-anchor": "end", "font-size": font },
        yt.length ? yt[j] : String(j));
    }
    if (panel.xlabel) { // just under the tick labels, as matplotlib puts it
      node(svg, "text", { x: left + width / 2, y: Math.min(y + h - 6, top + height + below - 2),
        "text-anchor": "middle", "font-size": 14 }, panel.xlabel);
    }
    if (panel.ylabel) { // just left of the tick labels
      var ly = top + height / 2, lx = Math.max(x + 14, left - 16 - longest(yt) * charW);
      node(svg, "text", { x: lx, y: ly, "text-anchor": "middle", "font-size": 14,
        transform: "rotate(-90 " + lx + " " + ly + ")" }, panel.ylabel);
    }
    // the colour bar: a gradient from 0 (bottom) to vmax (top), ticks beside it
    var bx = left + width + 12, id = "mh-bar-" + Math.random().toString(36).slice(2);
    var gradient = node(node(svg, "defs", {}), "linearGradient", { id: id, x1: 0, x2: 0, y1: 1, y2: 0 });
    stops.forEach(function (colour, k) {
      node(gradient, "stop", { offset: k / (stops.length - 1), "stop-color": colour });
    });
    node(svg, "rect", { x: bx, y: top, width: 12, height: height, fill: "url(#" + id + ")", stroke: "#000" });
    var barTicks = ticks(vmin, vmax);
    barTicks.forEach(function (t) {
      var ty = top + height * (1 - (t - vmin) / spread);
      node(svg, "line", { x1: bx + 12, x2: bx + 15, y1: ty, y2: ty, stroke: "#000" });
      node(svg, "text", { x: bx + 17, y: ty + 4, "font-size": font }, label(t));
    });
    if (panel.colorbar) { // beyond the longest tick label
      var cy2 = top + height / 2, cx2 = Math.min(x + w - 6, bx + 30 + longest(barTicks.map(label)) * charW);
      node(svg, "text", { x: cx2, y: cy2, "text-anchor": "middle", "font-size": 13,
        transform: "rotate(-90 " + cx2 + " " + cy2 + ")" }, panel.colorbar);
    }
    lines.forEach(function (line, k) {
      node(svg, "text", { x: left + width / 2, y: top - 8 - 17 * (lines.length - 1 - k), "text-anchor": "middle",
        "font-size": 15 }, line);
    });
  }

  // A line panel: series of points, an optional vertical line and circled point, the legend below the axes.
  function drawLine(svg, panel, x, y, w, h) {
    var labelled = panel.series.filter(function (s) { return s.label; });
    var legendRows = Math.ceil(labelled.length / 2), lines = String(panel.title || "").split("\n");
    var left = x + 62, top = y + 12 + 18 * lines.length, width = w - 76;
    var height = h - (top - y) - 44 - (legendRows ? 10 + 18 * legendRows : 0);
    var xsAll = [], ysAll = [];
    panel.series.forEach(function (s) { xsAll = xsAll.concat(s.x); ysAll = ysAll.concat(s.y); });
    if (panel.vline !== undefined) xsAll.push(panel.vline);
    var x0 = Math.min.apply(null, xsAll), x1 = Math.max.apply(null, xsAll);
    var pad = (x1 - x0 || 1) * 0.05; x0 -= pad; x1 += pad;
    var ylim = panel.ylim;
    if (!ylim) {
      var y0 = Math.min.apply(null, ysAll), y1 = Math.max.apply(null, ysAll), py = (y1 - y0 || 1) * 0.05;
      ylim = [y0 - py, y1 + py];
    }
    var sx = function (v) { return left + ((v - x0) / (x1 - x0)) * width; };
    var sy = function (v) { return top + height * (1 - (v - ylim[0]) / (ylim[1] - ylim[0])); };
    var xs = ticks(x0, x1), ys = ticks(ylim[0], ylim[1]);
    xs.forEach(function (t) {
      node(svg, "line", { x1: sx(t), x2: sx(t), y1: top, y2: top + height, stroke: "#e6e6e6" });
      node(svg, "text", { x: sx(t), y: top + height + 16, "text-anchor": "middle", "font-size": 13 }, label(t));
    });
    ys.forEach(function (t) {
      node(svg, "line", { x1: left, x2: left + width, y1: sy(t), y2: sy(t), stroke: "#e6e6e6" });
      node(svg, "text", { x: left - 6, y: sy(t) + 4, "text-anchor": "end", "font-size": 13 }, label(t));
    });
    panel.series.forEach(function (s) {
      var d = s.x.map(function (v, i) { return (i ? "L" : "M") + sx(v).toFixed(1) + " " + sy(s.y[i]).toFixed(1); });
      node(svg, "path", { d: d.join(""), fill: "none", stroke: s.color, "stroke-width": s.width || 1.5 });
      if (s.marker) {
        s.x.forEach(function (v, i) { node(svg, "circle", { cx: sx(v), cy: sy(s.y[i]), r: 2.5, fill: s.color }); });
      }
    });
    if (panel.vline !== undefined) {
      node(svg, "line", { x1: sx(panel.vline), x2: sx(panel.vline), y1: top, y2: top + height, stroke: "#000" });
    }
    if (panel.point) {
      node(svg, "circle", { cx: sx(panel.point[0]), cy: sy(panel.point[1]), r: 7, fill: "none", stroke: "#000",
        "stroke-width": 1.5 });
    }
    node(svg, "rect", { x: left, y: top, width: width, height: height, fill: "none", stroke: "#000" });
    if (panel.xlabel) {
      node(svg, "text", { x: left + width / 2, y: top + height + 36, "text-anchor": "middle", "font-size": 14 },
        panel.xlabel);
    }
    if (panel.ylabel) {
      var ly = top + height / 2, lx = x + 14;
      node(svg, "text", { x: lx, y: ly, "text-anchor": "middle", "font-size": 14,
        transform: "rotate(-90 " + lx + " " + ly + ")" }, panel.ylabel);
    }
    labelled.forEach(function (s, i) {
      var lx = left + (i % 2) * (width / 2) + 4, ly = top + height + 58 + 18 * Math.floor(i / 2);
      node(svg, "line", { x1: lx, x2: lx + 22, y1: ly - 4, y2: ly - 4, stroke: s.color, "stroke-width": s.width || 1.5 });
      node(svg, "text", { x: lx + 28, y: ly, "font-size": 13 }, s.label);
    });
    lines.forEach(function (line, k) {
      node(svg, "text", { x: left + width / 2, y: top - 8 - 17 * (lines.length - 1 - k), "text-anchor": "middle",
        "font-size": 15 }, line);
    });
  }

  // Where each panel goes: manyheads.viz.explorers._layout (state.columns a row, a panel's span taking several).
  function layout(state) {
    var columns = state.columns || state.panels.length, rows = [[]];
    state.panels.forEach(function (panel, index) {
      var span = Math.min(panel.span || 1, columns);
      if (rows[rows.length - 1].length + span > columns) rows.push([]);
      for (var k = 0; k < span; k++) rows[rows.length - 1].push(index);
    });
    return { columns: columns, rows: rows };
  }

  // The figure as SVG. On a phone (a viewport under NARROW px) panels side by side would shrink past reading, so
  // each panel takes its own row at its own size, one under the other (CONTRIBUTING.md, "Figures read on a phone").
  var NARROW = 640;

  function drawPanels(state) {
    var W = state.size[0] * 100, H = state.size[1] * 100, places = layout(state);
    var cw = W / places.columns, rh = H / places.rows.length;
    var stacked = places.columns > 1 && (window.innerWidth || NARROW) < NARROW;
    var width = stacked ? cw : W;
    var height = stacked ? rh * state.panels.length : H;
    var svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", "Figure (" + state.panels.map(function (p) { return p.title; }).join("; ") + ").");
    svg.setAttribute("style", "max-width:100%;width:" + width + "px;height:auto;font-family:sans-serif");
    state.panels.forEach(function (panel, i) {
      var draw = panel.kind === "heatmap" ? drawHeatmap : panel.kind === "line" ? drawLine : drawPanel;
      if (stacked) return draw(svg, panel, 0, i * rh, width, rh);
      places.rows.forEach(function (row, r) {
        var first = row.indexOf(i), span = row.lastIndexOf(i) - first + 1;
        if (first >= 0) draw(svg, panel, first * cw, r * rh, span * cw, rh);
      });
    });
    return svg;
  }
  window.manyheadsDrawPanels = drawPanels;

  // A slider moved: its readout's text changed (the widget manager writes it), so draw its box's state.
  if (typeof MutationObserver === "function") {
    new MutationObserver(function (mutations) {
      var boxes = [];
      mutations.forEach(function (mutation) {
        var target = mutation.target.nodeType === 1 ? mutation.target : mutation.target.parentElement;
        var control = target && target.closest && target.closest(".mh-kind--float, .mh-kind--slider, .mh-kind--selection");
        var box = control && control.closest(".mh-explorer");
        if (box && boxes.indexOf(box) < 0) boxes.push(box);
      });
      boxes.forEach(showState);
    }).observe(document.documentElement, { subtree: true, childList: true, characterData: true });
  }

  document.addEventListener("change", function (event) {
    var control = event.target && event.target.closest && event.target.closest(".mh-control");
    var box = control && control.closest(".mh-explorer");
    if (box) refresh(box);
  });
})();
