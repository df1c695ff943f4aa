"""Chapter 4's probe data (manyheads.data.probes) and head statistics (manyheads.analysis)."""

from __future__ import annotations

import math
from collections import Counter
from importlib import resources

import pytest
import torch

from manyheads import analysis
from manyheads.data import probes


# ------------------------------------------------------------------------------------------------ probe data
def test_probe_set_size_and_relations():
    sentences = probes.dependency_sentences()
    assert len(sentences) >= 300
    counts = Counter(r for s in sentences for r in s.relations)
    for relation in ("det", "nsubj", "dobj", "amod", "prep", "pobj", "poss"):
        assert counts[relation] >= 50, relation
    assert len(probes.natural_sentences()) >= 25
    assert len(probes.coreference_items()) >= 100


def test_grammar_is_seeded_and_distinct():
    a, b = probes.grammar_sentences(50, seed=3), probes.grammar_sentences(50, seed=3)
    assert a == b
    assert a != probes.grammar_sentences(50, seed=4)
    assert len({s.words for s in probes.grammar_sentences()}) == 320


def test_grammar_arcs_are_linguistically_right():
    for s in probes.grammar_sentences():
        root = s.heads.index(-1)
        assert s.relations[root] == "root"
        for d, h in s.arcs():
            rel, head_rel = s.relations[d], s.relations[h]
            if rel in ("det", "amod", "poss"):
                assert h > d and head_rel in ("nsubj", "dobj", "pobj"), (s.text, d)
            elif rel in ("nsubj", "dobj", "aux", "punct"):
                assert h == root
            elif rel == "pobj":
                assert head_rel == "prep" and h < d
            elif rel == "prep":
                assert h in (root,) or head_rel == "nsubj"
        assert s.words[-1] == "." and s.words[0][0].isupper()
        # "a" before a vowel became "an"
        for w, nxt in zip(s.words, s.words[1:]):
            assert not (w.lower() == "a" and nxt[0] in "aeiou"), s.text


def test_natural_sentences_parse_from_the_shipped_file():
    text = resources.files("manyheads").joinpath("data", "natural_sentences.conll").read_text()
    sentences = probes.read_conll(text)
    assert sentences == probes.natural_sentences()
    first = sentences[0]
    assert first.words[:3] == ("The", "committee", "approved")
    assert first.arcs("det") == [(0, 1), (3, 5)]
    assert first.arcs("nsubj") == [(1, 2)]
    for s in sentences:  # every non-root word has a head inside the sentence, one root, no self-loops (validated)
        assert s.relations[s.heads.index(-1)] == "root"


def test_read_conll_rejects_bad_input():
    with pytest.raises(ValueError, match="4 columns"):
        probes.read_conll("1 The 2\n")
    with pytest.raises(ValueError, match="root"):
        probes.read_conll("1 The 2 det\n2 dog 1 nsubj\n")
    with pytest.raises(ValueError, match="1..n"):
        probes.read_conll("1 The 3 det\n3 dog 0 root\n")


def test_coreference_items():
    items = probes.coreference_items()
    pronouns = {"he", "she", "him", "her", "it", "they"}
    for item in items:
        assert item.words[item.pronoun].lower() in pronouns
        assert item.antecedent in item.candidates and max(item.candidates) < item.pronoun
    template = [i for i in items if i.source == "template"]
    # the pronoun agrees in gender with the antecedent and not with the other person
    male = {"John", "David", "Peter", "Tom", "James", "Mark", "Paul", "Daniel"}
    for item in template:
        is_male = item.words[item.pronoun] in ("he", "him")
        assert (item.words[item.antecedent] in male) == is_male
        other = [c for c in item.candidates if c != item.antecedent][0]
        assert (item.words[other] in male) != is_male
    # the nearest mention is not always right, so the baseline is not trivial
    assert 0.3 < analysis.coreference_baseline(items) < 0.7
    hand = [i for i in items if i.source == "natural"]
    assert len(hand) >= 10
    assert hand[0].words[hand[0].antecedent] == "company" and hand[0].words[hand[0].pronoun] == "it"


# ----------------------------------------------------------------------------------- word pieces → words
def _reference_word_attention(weights, word_ids):
    n_words = max(w for w in word_ids if w is not None) + 1
    out = torch.zeros(*weights.shape[:-2], n_words, n_words, dtype=weights.dtype)
    for a in range(n_words):
        rows = [i for i, w in enumerate(word_ids) if w == a]
        for b in range(n_words):
            cols = [j for j, w in enumerate(word_ids) if w == b]
            out[..., a, b] = sum(weights[..., i, cols].sum(-1) for i in rows) / len(rows)
    return out


def test_word_attention_sums_keys_and_averages_queries():
    # [CLS] the un ##believ ##able dog [SEP]
    word_ids = [None, 0, 1, 1, 1, 2, None]
    weights = torch.softmax(torch.randn(2, 3, 7, 7, generator=torch.Generator().manual_seed(0)), dim=-1)
    got = analysis.word_attention(weights, word_ids)
    assert got.shape == (2, 3, 3, 3)
    torch.testing.assert_close(got, _reference_word_attention(weights, word_ids))
    # by hand: attention from word 1 (pieces 2..4) to word 2 (piece 5), and from word 0 to word 1
    torch.testing.assert_close(got[..., 1, 2], weights[..., 2:5, 5].mean(-1))
    torch.testing.assert_close(got[..., 0, 1], weights[..., 1, 2:5].sum(-1))
    # rows keep the mass given to words (not to [CLS]/[SEP])
    torch.testing.assert_close(got.sum(-1)[..., 1], (weights[..., 2:5, 1:6].sum(-1)).mean(-1))


def test_word_attention_ignores_padding_and_checks_words():
    weights = torch.softmax(torch.randn(1, 1, 6, 6), dim=-1)
    got = analysis.word_attention(weights, [None, 0, 1, None])  # two padding positions at the end
    torch.testing.assert_close(got, weights[..., 1:3, 1:3])
    with pytest.raises(ValueError, match="cover"):
        analysis.word_attention(weights, [None, 0, 2, None])


def test_word_attentions_from_the_encoder_match_the_tokenizer(tiny_model):
    encoder, tokenizer = tiny_model
    sentences = [("Unbelievably", "tall", "giraffes", "."), ("A", "dog", ".")]
    out = analysis.word_attentions(encoder, tokenizer, sentences, batch_size=2)
    assert [tuple(w.shape) for w in out] == [(2, 2, 4, 4), (2, 2, 3, 3)]
    batch = tokenizer([list(s) for s in sentences])
    attn = encoder(batch).stacked_attentions()
    torch.testing.assert_close(out[1], analysis.word_attention(attn[:, 1], batch.word_ids[1]))


@pytest.fixture(scope="module")
def tiny_model():
    """A small random BERT with the real MiniLM tokenizer (the real weights are not needed for shapes)."""
    from manyheads.models import checkpoints as pretrained
    from manyheads.models.bert import BertConfig, BertEncoder
    from manyheads.models.tokenizer import Tokenizer

    directory = pretrained.model_dir()
    tokenizer = Tokenizer.from_dir(directory)
    torch.manual_seed(0)
    config = BertConfig.from_hf(
        {
            **pretrained.read_config(directory),
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "hidden_size": 16,
            "intermediate_size": 32,
        }
    )
    return BertEncoder(config).eval(), tokenizer


# --------------------------------------------------------------------------------------- head statistics
def test_head_name_counts_from_one():
    assert analysis.head_name(7, 10) == "8-11"
    assert analysis.head_name(0, 0) == "1-1"


def test_attention_entropy():
    w = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]])
    assert math.isclose(float(analysis.mean_attention_entropy(w)), math.log(4) / 2, rel_tol=1e-6)
    batch = torch.softmax(torch.randn(3, 2, 5, 7), dim=-1)
    got = analysis.mean_attention_entropy(batch)
    assert got.shape == (3, 2)
    torch.testing.assert_close(got, -(batch * batch.log()).sum(-1).mean(-1))


def test_offset_attention_handles_edges_and_rectangles():
    w = torch.arange(12.0).reshape(3, 4)  # seq_q 3, seq_k 4
    assert float(analysis.offset_attention(w, -1)) == (w[1, 0] + w[2, 1]) / 2
    assert float(analysis.offset_attention(w, 1)) == (w[0, 1] + w[1, 2] + w[2, 3]) / 3
    assert float(analysis.offset_attention(w, 0)) == (w[0, 0] + w[1, 1] + w[2, 2]) / 3
    assert torch.isnan(analysis.offset_attention(w, 5))
    assert analysis.offset_attention(torch.rand(2, 3, 5, 5), -2).shape == (2, 3)


def test_relation_accuracy_excludes_the_word_itself():
    w = torch.zeros(1, 2, 3, 3)
    w[0, 0] = torch.tensor([[0.9, 0.1, 0.0], [0.0, 0.5, 0.5], [0.2, 0.7, 0.1]])  # self is max for word 0: skipped
    w[0, 1] = torch.tensor([[0.1, 0.0, 0.9], [0.8, 0.1, 0.1], [0.1, 0.1, 0.8]])
    arcs = [(0, 1), (1, 2), (2, 1)]
    got = analysis.relation_accuracy(w, arcs)
    assert got.tolist() == [[1.0, 0.0]]
    with pytest.raises(ValueError):
        analysis.relation_accuracy(w, [])


def _sentence(words, heads, relations):
    return probes.Sentence(tuple(words), tuple(heads), tuple(relations))


def test_relation_table_and_offset_baseline():
    s1 = _sentence(["the", "dog", "ran"], [1, 2, -1], ["det", "nsubj", "root"])
    s2 = _sentence(["a", "big", "cat", "sat"], [2, 2, 3, -1], ["det", "amod", "nsubj", "root"])
    assert analysis.offset_baseline([s1, s2], "det") == (1, 0.5)  # offsets +1 (s1) and +2 (s2): tie → +1
    assert analysis.offset_baseline([s1, s2], "amod") == (1, 1.0)
    # head (0, 1) always attends to the gold head; head (0, 0) to the previous word
    attns = []
    for s in (s1, s2):
        n = len(s.words)
        w = torch.zeros(1, 2, n, n)
        for i in range(n):
            w[0, 0, i, (i - 1) % n] = 1.0
            w[0, 1, i, s.heads[i] if s.heads[i] >= 0 else 0] = 1.0
        attns.append(w)
    rows = {r.relation: r for r in analysis.relation_table(attns, [s1, s2], ["det", "nsubj", "amod", "dobj"])}
    assert set(rows) == {"det", "nsubj", "amod"}  # no dobj arcs: no row
    assert rows["det"].best_head == (0, 1) and rows["det"].accuracy == 1.0 and rows["det"].n_arcs == 2
    assert rows["det"].head == "1-2"
    counts = analysis.relation_counts(attns, [s1, s2], ["det"])["det"]
    assert counts[0].tolist() == [[0, 2]] and counts[1] == 2


def test_pobj_is_scored_with_the_preposition_attending_to_its_object():
    # Clark et al. score pobj from the head word (the preposition) to its dependent (the object), every other
    # relation from the dependent to its head; the baseline offset counts from the same word.
    s = _sentence(
        ["Tom", "sat", "in", "the", "park", "."], [1, -1, 1, 4, 2, 1], ["nsubj", "root", "prep", "det", "pobj", "punct"]
    )
    w = torch.zeros(1, 2, 6, 6)
    w[0, 0, 2, 4] = 1.0  # head 1-1: "in" attends to "park"
    w[0, 1, 4, 2] = 1.0  # head 1-2: "park" attends to "in"
    rows = {r.relation: r for r in analysis.relation_table([w], [s], ["prep", "pobj"])}
    assert rows["pobj"].best_head == (0, 0) and rows["pobj"].accuracy == 1.0
    assert analysis.relation_counts([w], [s], ["pobj"])["pobj"][0].tolist() == [[1, 0]]
    assert rows["pobj"].direction == "head → dependent" and rows["prep"].direction == "dependent → head"
    assert analysis.offset_baseline([s], "pobj") == (2, 1.0)  # the object two words after the preposition
    assert analysis.offset_baseline([s], "prep") == (-1, 1.0)  # the preposition's head one word before it
    # relation_accuracy itself scores the pairs as given: the arc (park, in) is "park attends to in"
    assert analysis.relation_accuracy(w, s.arcs("pobj")).tolist() == [[0.0, 1.0]]


def test_coreference_accuracy():
    item = probes.CorefItem(("John", "met", "Mary", "and", "she", "smiled"), 4, 2, (0, 2))
    w = torch.zeros(1, 2, 6, 6)
    w[0, 0, 4] = torch.tensor([0.3, 0, 0.2, 0, 0.5, 0])  # more on John: wrong (itself ignored as not a candidate)
    w[0, 1, 4] = torch.tensor([0.1, 0, 0.2, 0, 0.7, 0])  # more on Mary: right
    assert analysis.coreference_accuracy([w], [item]).tolist() == [[0.0, 1.0]]
    assert item.nearest == 2


def test_surface_statistics_on_a_hand_made_pattern():
    tokens = ["[CLS]", "the", "dog", ",", "ran", "[SEP]"]
    n = len(tokens)
    w = torch.zeros(1, 3, n, n, dtype=torch.float64)
    w[0, 0, :, 0] = 1.0  # all to [CLS]
    for i in range(n):
        w[0, 1, i, max(i - 1, 0)] = 1.0  # previous token (row 0 to itself)
    w[0, 2] = 1.0 / n  # uniform
    stats = analysis.surface_statistics([w], [tokens])
    assert stats["cls"][0, 0] == 1.0
    assert math.isclose(float(stats["prev"][0, 1]), (n - 1) / n)
    assert math.isclose(float(stats["sep"][0, 2]), 1 / n) and math.isclose(float(stats["punct"][0, 2]), 1 / n)
    assert math.isclose(float(stats["entropy"][0, 2]), math.log(n), rel_tol=1e-9)
    assert float(stats["entropy"][0, 0]) == 0.0
    labels = analysis.head_taxonomy(stats)
    assert labels == [["[CLS]", "previous token", "broad"]]


@pytest.mark.slow
def test_probes_on_the_pretrained_model_beat_the_baselines():
    """On MiniLM, the best head beats the best fixed offset for determiners and direct objects, and the numbers
    stay the same from run to run (the chapter's glued figures depend on it)."""
    from manyheads.models import bert as enc_module

    encoder, tokenizer = enc_module.load_encoder()
    sentences = probes.dependency_sentences(n_grammar=120)
    attns = analysis.word_attentions(encoder, tokenizer, sentences)
    rows = {r.relation: r for r in analysis.relation_table(attns, sentences, probes.RELATIONS)}
    for relation in ("det", "dobj", "poss"):
        assert rows[relation].accuracy > rows[relation].baseline_accuracy + 0.1, rows[relation]
    again = analysis.word_attentions(encoder, tokenizer, sentences[:5])
    for a, b in zip(attns[:5], again):
        torch.testing.assert_close(a, b)


# ------------------------------------------------------------------------- exercise 4's visible checks
from manyheads.checks import specialization as checks4  # noqa: E402
from manyheads.checks.own_work import suspended  # noqa: E402


def _stub(*args, **kwargs):
    raise NotImplementedError()


def test_visible_checks_pass_on_the_reference(capsys):
    with suspended():  # the course's own computation, run through its check on purpose (the own-work rule is off)
        checks4.check_mean_attention_entropy(analysis.mean_attention_entropy)
        checks4.check_offset_attention(analysis.offset_attention)
        checks4.check_relation_accuracy(analysis.relation_accuracy)
    assert capsys.readouterr().out.count("all visible checks passed") == 3


@pytest.mark.parametrize(
    "check", [checks4.check_mean_attention_entropy, checks4.check_offset_attention, checks4.check_relation_accuracy]
)
def test_visible_checks_let_not_implemented_error_through(check):
    with pytest.raises(NotImplementedError):
        check(_stub)


@pytest.mark.parametrize(
    "bug, message",
    [
        (lambda w: -torch.special.xlogy(w, w).sum(-1).sum(-1), "summed over the query rows"),
        (lambda w: (w * w.log()).sum(-1).mean(-1), "negative"),
        (lambda w: -(w * w.log()).sum(-1).mean(-1), "NaN"),
        (lambda w: -torch.special.xlogy(w, w).sum(-1), "shape"),
    ],
)
def test_entropy_check_names_the_bug(bug, message):
    with pytest.raises(AssertionError, match=message):
        checks4.check_mean_attention_entropy(bug)


def _offset_all_queries(w, offset):  # wraps around instead of skipping the queries that fall off the edge
    return torch.stack([w[..., i, (i + offset) % w.shape[-1]] for i in range(w.shape[-2])], -1).mean(-1)


@pytest.mark.parametrize(
    "bug, message",
    [
        (lambda w, o: analysis.offset_attention(w, -o), "previous token"),
        (_offset_all_queries, "offset"),
        (lambda w, o: w.diagonal(offset=o, dim1=-2, dim2=-1).sum(-1), "expected"),
    ],
)
def test_offset_check_names_the_bug(bug, message):
    with suspended(), pytest.raises(AssertionError, match=message):  # a bug built on the package's function
        checks4.check_offset_attention(bug)


def _accuracy_with_self(w, arcs):
    d = torch.tensor([a for a, _ in arcs])
    h = torch.tensor([b for _, b in arcs])
    return (w.argmax(-1)[..., d] == h).double().mean(-1)


def _accuracy_wrong_axis(w, arcs):  # argmax over queries instead of keys
    return _accuracy_with_self(w.transpose(-2, -1), arcs)


@pytest.mark.parametrize(
    "bug, message", [(_accuracy_with_self, "exclude the dependent"), (_accuracy_wrong_axis, "argmax over axis -2")]
)
def test_relation_check_names_the_bug(bug, message):
    with pytest.raises(AssertionError, match=message):
        checks4.check_relation_accuracy(bug)
