// The head-budget calculator of chapters 3 and 7 without a kernel: a port of manyheads.costs.head_budget (with the
// functions it calls) and of manyheads.viz.widgets.head_budget_html, registered for book_static/explorers.js.
// Same numbers (integers are BigInt, exact however large), same text (Python's "{:,}" and "{:.3g}", with its
// round-half-even), same ValueError messages, checked in order as Python checks them. A change to the Python
// functions is a change here: tests/book/test_head_budget_port.py compares the two on random configurations.
(function () {
  "use strict";

  function ValueError(message) {
    this.name = "ValueError";
    this.message = message;
    this.stack = new Error(message).stack;
  }
  ValueError.prototype = Object.create(Error.prototype);
  ValueError.prototype.constructor = ValueError;

  // --- Python's repr and type name of a value that is not an integer (positive_int's message) --------------------

  function floatRepr(x) {
    if (Number.isNaN(x)) return "nan";
    if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
    var parts = x.toExponential().split("e"); // the shortest digits that read back as x, as Python's repr
    var digits = parts[0].replace("-", "").replace(".", "");
    var exp = parseInt(parts[1], 10);
    var sign = x < 0 ? "-" : "";
    if (exp < -4 || exp >= 16) {
      var mantissa = digits[0] + (digits.length > 1 ? "." + digits.slice(1) : "");
      return sign + mantissa + "e" + (exp < 0 ? "-" : "+") + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
    }
    if (exp < 0) return sign + "0." + "0".repeat(-exp - 1) + digits;
    var whole = digits.length > exp + 1 ? digits.slice(0, exp + 1) : digits + "0".repeat(exp + 1 - digits.length);
    return sign + whole + "." + (digits.slice(exp + 1) || "0");
  }

  function pythonRepr(value) {
    if (value === null || value === undefined) return "None";
    if (typeof value === "boolean") return value ? "True" : "False";
    if (typeof value === "number") return floatRepr(value);
    if (typeof value === "string") return "'" + value + "'";
    return String(value);
  }

  function pythonType(value) {
    if (value === null || value === undefined) return "NoneType";
    return { boolean: "bool", number: "float", string: "str" }[typeof value] || typeof value;
  }

  // --- manyheads.costs -------------------------------------------------------------------------------------------

  function positiveInt(name, value) {
    var n;
    if (typeof value === "bigint") n = value;
    else if (typeof value === "number" && Number.isInteger(value)) n = BigInt(value);
    else {
      throw new ValueError(
        name + " must be a positive integer, got " + pythonRepr(value) + " (a " + pythonType(value) + ", not an int)"
      );
    }
    if (n <= 0n) throw new ValueError(name + " must be a positive integer, got " + n);
    return n;
  }

  function divisors(n) {
    n = positiveInt("n", n);
    var small = [];
    for (var d = 1n; d * d <= n; d++) if (n % d === 0n) small.push(d);
    var all = small.concat(small.map(function (d) { return n / d; }));
    all.sort(function (a, b) { return a < b ? -1 : a > b ? 1 : 0; });
    return all.filter(function (d, i) { return i === 0 || d !== all[i - 1]; });
  }

  function listRepr(values) {
    return "[" + values.join(", ") + "]";
  }

  function headDim(dModel, nHeads) {
    dModel = positiveInt("d_model", dModel);
    nHeads = positiveInt("n_heads", nHeads);
    if (dModel % nHeads) {
      throw new ValueError(
        "n_heads=" + nHeads + " does not divide d_model=" + dModel + ", so the heads cannot share the width " +
          "equally; valid head counts for d_model=" + dModel + " are " + listRepr(divisors(dModel))
      );
    }
    return dModel / nHeads;
  }

  function kvHeads(nHeads, nKvHeads) {
    if (nKvHeads === null || nKvHeads === undefined) return nHeads;
    nKvHeads = positiveInt("n_kv_heads", nKvHeads);
    if (nHeads % nKvHeads) {
      throw new ValueError(
        "n_kv_heads=" + nKvHeads + " does not divide n_heads=" + nHeads + ": each key/value head must serve the " +
          "same number of query heads; valid values are " + listRepr(divisors(nHeads)) +
          " (1 = multi-query, " + nHeads + " = multi-head)"
      );
    }
    return nKvHeads;
  }

  function mhaParamCount(dModel, nHeads, bias, nKvHeads) {
    dModel = positiveInt("d_model", dModel);
    nHeads = positiveInt("n_heads", nHeads);
    var dHead = headDim(dModel, nHeads);
    var kvWidth = kvHeads(nHeads, nKvHeads) * dHead;
    var weights = 2n * dModel * dModel + 2n * dModel * kvWidth;
    var biases = bias ? 2n * dModel + 2n * kvWidth : 0n;
    return weights + biases;
  }

  function attentionFlops(dModel, nHeads, seqLen, nKvHeads, batch) {
    dModel = positiveInt("d_model", dModel);
    nHeads = positiveInt("n_heads", nHeads);
    var dHead = headDim(dModel, nHeads);
    seqLen = positiveInt("seq_len", seqLen);
    batch = positiveInt("batch", batch);
    var kvWidth = kvHeads(nHeads, nKvHeads) * dHead;
    var projections = 2n * batch * seqLen * dModel * (2n * dModel + 2n * kvWidth);
    var scores = 2n * batch * nHeads * seqLen * seqLen * dHead;
    var weightedSum = 2n * batch * nHeads * seqLen * seqLen * dHead;
    var softmax = 5n * batch * nHeads * seqLen * seqLen;
    return { softmax: softmax, total: projections + scores + weightedSum + softmax };
  }

  function attentionMatrixBytes(nHeads, seqLen, batch, bytesPerElement) {
    nHeads = positiveInt("n_heads", nHeads);
    seqLen = positiveInt("seq_len", seqLen);
    batch = positiveInt("batch", batch);
    var size = positiveInt("bytes_per_element", bytesPerElement);
    return batch * nHeads * seqLen * seqLen * size;
  }

  function kvCacheBytes(nLayers, nKvHeads, dHead, seqLen, batch, bytesPerElement) {
    nLayers = positiveInt("n_layers", nLayers);
    nKvHeads = positiveInt("n_kv_heads", nKvHeads);
    dHead = positiveInt("d_head", dHead);
    seqLen = positiveInt("seq_len", seqLen);
    batch = positiveInt("batch", batch);
    var size = positiveInt("bytes_per_element", bytesPerElement);
    return 2n * nLayers * nKvHeads * dHead * seqLen * batch * size;
  }

  function given(args, key, fallback) {
    return Object.prototype.hasOwnProperty.call(args, key) ? args[key] : fallback;
  }

  // head_budget(d_model, n_heads, n_kv_heads=None, seq_len=512, batch=1, bias=True, n_layers=1, attention_bytes=4,
  // cache_bytes=2), with the arguments by name; integer results are BigInt.
  function headBudget(args) {
    var batch = given(args, "batch", 1);
    var bias = given(args, "bias", true);
    var dModel = positiveInt("d_model", args.d_model);
    var nHeads = positiveInt("n_heads", args.n_heads);
    var seqLen = positiveInt("seq_len", given(args, "seq_len", 512));
    var dHead = headDim(dModel, nHeads);
    var nKv = kvHeads(nHeads, given(args, "n_kv_heads", null));
    var layers = positiveInt("n_layers", given(args, "n_layers", 1));
    var flops = attentionFlops(dModel, nHeads, seqLen, nKv, batch);
    var params = layers * mhaParamCount(dModel, nHeads, bias, nKv);
    var matrix = layers * attentionMatrixBytes(nHeads, seqLen, batch, given(args, "attention_bytes", 4));
    var cache = kvCacheBytes(layers, nKv, dHead, seqLen, batch, given(args, "cache_bytes", 2));
    return {
      d_model: dModel,
      n_heads: nHeads,
      n_kv_heads: nKv,
      seq_len: seqLen,
      d_head: dHead,
      params: params,
      flops: layers * flops.total,
      softmax_flops: layers * flops.softmax,
      attention_matrix_bytes: matrix,
      kv_cache_bytes: cache,
      low_rank_bottleneck: dHead < seqLen - 1n,
    };
  }

  // --- manyheads.viz.tables: Python's "{:.3g}" and "{:,}" ----------------------------------------------------------

  // x as an exact fraction [numerator, denominator] of BigInts (x > 0, finite)
  function exactFraction(x) {
    var view = new DataView(new ArrayBuffer(8));
    view.setFloat64(0, x);
    var bits = view.getBigUint64(0);
    var biased = Number((bits >> 52n) & 0x7ffn);
    var mantissa = bits & ((1n << 52n) - 1n);
    var exponent = biased === 0 ? -1074 : biased - 1075;
    if (biased !== 0) mantissa |= 1n << 52n;
    return exponent >= 0 ? [mantissa << BigInt(exponent), 1n] : [mantissa, 1n << BigInt(-exponent)];
  }

  function stripZeros(text) {
    return text.indexOf(".") < 0 ? text : text.replace(/0+$/, "").replace(/\.$/, "");
  }

  // format(x, ".{precision}g"): rounded half to even from x's exact binary value, as Python does
  function formatG(x, precision) {
    if (x === 0) return "0";
    var sign = x < 0 ? "-" : "";
    var fraction = exactFraction(Math.abs(x));
    var num = fraction[0];
    var den = fraction[1];
    function atLeast(k) { // |x| >= 10^k
      return k >= 0 ? num >= 10n ** BigInt(k) * den : num * 10n ** BigInt(-k) >= den;
    }
    var exp = Math.floor(Math.log10(Math.abs(x)));
    while (!atLeast(exp)) exp--;
    while (atLeast(exp + 1)) exp++;
    var shift = precision - 1 - exp;
    var n = shift >= 0 ? num * 10n ** BigInt(shift) : num;
    var d = shift >= 0 ? den : den * 10n ** BigInt(-shift);
    var q = n / d;
    var twice = 2n * (n % d);
    if (twice > d || (twice === d && q % 2n === 1n)) q += 1n;
    if (q === 10n ** BigInt(precision)) {
      q = 10n ** BigInt(precision - 1);
      exp += 1;
    }
    var digits = q.toString();
    if (exp < -4 || exp >= precision) {
      var mantissa = stripZeros(digits[0] + "." + digits.slice(1));
      return sign + mantissa + "e" + (exp < 0 ? "-" : "+") + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
    }
    var fixed = exp >= 0 ? digits.slice(0, exp + 1) + "." + digits.slice(exp + 1) : "0." + "0".repeat(-exp - 1) + digits;
    return sign + stripZeros(fixed);
  }

  function withCommas(n) {
    return n.toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }

  var COUNT_UNITS = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  var BYTE_UNITS = [[40, "TiB"], [30, "GiB"], [20, "MiB"], [10, "KiB"]];

  function formatCount(n) {
    n = BigInt(n);
    var size = n < 0n ? -n : n;
    for (var i = 0; i < COUNT_UNITS.length; i++) {
      // Python divides float(n) by the float 1e12 (both rounded half to even, as Number(n) is)
      if (size >= COUNT_UNITS[i][0]) return formatG(Number(n) / COUNT_UNITS[i][0], 3) + " " + COUNT_UNITS[i][1];
    }
    return n.toString();
  }

  function formatBytes(n) {
    n = BigInt(n);
    for (var i = 0; i < BYTE_UNITS.length; i++) {
      // int / 2**k in Python is n / 2^k correctly rounded: Number(n) rounds once, dividing by 2^k is exact
      if (n >= 1n << BigInt(BYTE_UNITS[i][0])) {
        return formatG(Number(n) / Math.pow(2, BYTE_UNITS[i][0]), 3) + " " + BYTE_UNITS[i][1];
      }
    }
    return n + " B";
  }

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;" }[c];
    });
  }

  // --- manyheads.viz.widgets.head_budget_html ----------------------------------------------------------------------

  // head_budget_html(d_model, n_heads, n_kv_heads=None, seq_len=512, n_layers=1, batch=1), arguments by name
  function headBudgetHtml(args) {
    var nLayers = given(args, "n_layers", 1);
    var batch = given(args, "batch", 1);
    var seqLen = given(args, "seq_len", 512);
    var b;
    try {
      b = headBudget({
        d_model: args.d_model,
        n_heads: args.n_heads,
        n_kv_heads: given(args, "n_kv_heads", null),
        seq_len: seqLen,
        n_layers: nLayers,
        batch: batch,
      });
    } catch (error) {
      if (!(error instanceof ValueError)) throw error;
      return (
        '<div style="color:#a40000;border-left:4px solid #a40000;padding:4px 8px">' +
        "<b>Invalid combination.</b> " + escapeHtml(error.message) + "</div>"
      );
    }
    var kind = b.n_kv_heads === b.n_heads ? "multi-head" : b.n_kv_heads === 1n ? "multi-query" : "grouped-query";
    var bottleneck = b.low_rank_bottleneck
      ? "yes: d_head = " + b.d_head + " &lt; n − 1 = " + (b.seq_len - 1n) + ", so some attention patterns cannot be produced"
      : "no: d_head = " + b.d_head + " ≥ n − 1 = " + (b.seq_len - 1n) + ", enough for any pattern if the tokens are independent";
    var layers = nLayers > 1 ? " (" + nLayers + " layers)" : " (one layer)";
    var rows = [
      ["d_head = d_model / n_heads", "" + b.d_head],
      ["attention type", kind + ": " + b.n_heads + " query heads share " + b.n_kv_heads + " key/value heads"],
      ["attention parameters, with biases" + layers, withCommas(b.params) + " (" + formatCount(b.params) + ")"],
      ["forward FLOPs" + layers, formatCount(b.flops) + ", of which softmax " + formatCount(b.softmax_flops)],
      ["attention weights, float32" + layers, formatBytes(b.attention_matrix_bytes)],
      ["KV cache, 16-bit" + layers, formatBytes(b.kv_cache_bytes)],
      [
        "KV cache with one K/V head per query head",
        formatBytes((b.kv_cache_bytes * b.n_heads) / b.n_kv_heads) + " (" + b.n_heads / b.n_kv_heads + "× this one)",
      ],
      ["low-rank bottleneck (d_head < n − 1)?", bottleneck],
    ];
    var body = rows.map(function (row) { return "<tr><td>" + row[0] + "</td><td>" + row[1] + "</td></tr>"; }).join("");
    var caption =
      "d_model = " + args.d_model + ", n_heads = " + args.n_heads + ", n_kv_heads = " + b.n_kv_heads +
      ", sequence length n = " + seqLen + ", batch " + batch;
    return '<table class="table"><caption>' + caption + "</caption><tbody>" + body + "</tbody></table>";
  }

  window.manyheadsCosts = {
    ValueError: ValueError,
    headBudget: headBudget,
    headBudgetHtml: headBudgetHtml,
    formatCount: formatCount,
    formatBytes: formatBytes,
    formatG: formatG,
  };
  var registry = (window.manyheadsExplorers = window.manyheadsExplorers || {});
  registry.head_budget = headBudgetHtml;
})();
