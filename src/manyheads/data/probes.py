"""Probe data for chapter 4 (what heads learn), made by the project and shipped with the package.

Three kinds of data, all shipped with the package (nothing is downloaded):

* :func:`grammar_sentences`: sentences from a small seeded grammar, each with its gold dependency arcs
  (Stanford-dependency labels as in Clark et al. 2019: det, nsubj, dobj, amod, prep, pobj, poss, aux, root, punct).
* :func:`natural_sentences`: hand-annotated natural sentences (``data/natural_sentences.conll``).
* :func:`coreference_items`: pronoun → antecedent items, from templates whose pronoun is settled by gender or
  number plus hand-written ones (``data/coreference.txt``).

Conventions: words are indexed from 0 within a sentence; an arc is ``(dependent, head)``; the root's head is -1.
Turning attention between word pieces into attention between words is :mod:`manyheads.analysis.collect`'s job.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

__all__ = [
    "RELATIONS",
    "Sentence",
    "CorefItem",
    "grammar_sentences",
    "natural_sentences",
    "dependency_sentences",
    "coreference_items",
    "read_conll",
]

#: The relations chapter 4 reports, in table order.
RELATIONS = ("det", "amod", "poss", "nsubj", "dobj", "prep", "pobj")


@dataclass(frozen=True)
class Sentence:
    """words: the sentence's words. heads[i]: index of word i's head (-1 for the root). relations[i]: its label."""

    words: tuple[str, ...]
    heads: tuple[int, ...]
    relations: tuple[str, ...]
    source: str = "grammar"

    def __post_init__(self) -> None:
        n = len(self.words)
        if not (len(self.heads) == len(self.relations) == n):
            raise ValueError("words, heads and relations must have the same length")
        if sum(h == -1 for h in self.heads) != 1:
            raise ValueError(f"a sentence needs exactly one root: {' '.join(self.words)}")
        for i, h in enumerate(self.heads):
            if h == i or not -1 <= h < n:
                raise ValueError(f"bad head {h} for word {i} in: {' '.join(self.words)}")

    def arcs(self, relation: str | None = None) -> list[tuple[int, int]]:
        """(dependent, head) pairs, the root excluded; only those labelled ``relation`` if given."""
        return [
            (i, h)
            for i, (h, r) in enumerate(zip(self.heads, self.relations))
            if h >= 0 and (relation is None or r == relation)
        ]

    @property
    def text(self) -> str:
        return " ".join(self.words)


@dataclass(frozen=True)
class CorefItem:
    """words; pronoun: index of the pronoun; antecedent: index of the head word of the mention it refers to;
    candidates: indices of every mention before the pronoun (the antecedent included), in order."""

    words: tuple[str, ...]
    pronoun: int
    antecedent: int
    candidates: tuple[int, ...]
    source: str = "template"

    def __post_init__(self) -> None:
        if self.antecedent not in self.candidates:
            raise ValueError("the antecedent must be one of the candidates")
        if len(self.candidates) < 2 or max(self.candidates) >= self.pronoun:
            raise ValueError("need at least two candidate mentions, all before the pronoun")

    @property
    def text(self) -> str:
        return " ".join(self.words)

    @property
    def nearest(self) -> int:
        """The candidate closest before the pronoun (the 'nearest mention' baseline)."""
        return max(self.candidates)


# ------------------------------------------------------------------------------------------------------ grammar
_ANIMATE = (
    "teacher",
    "doctor",
    "farmer",
    "student",
    "child",
    "dog",
    "cat",
    "pilot",
    "artist",
    "baker",
    "nurse",
    "lawyer",
    "singer",
    "driver",
    "horse",
    "neighbour",
)
_THINGS = (
    "book",
    "letter",
    "car",
    "house",
    "apple",
    "ball",
    "song",
    "picture",
    "key",
    "box",
    "cake",
    "door",
    "map",
    "bike",
    "hat",
    "chair",
    "coat",
    "lamp",
    "bottle",
    "ticket",
)
_PLACES = (
    "garden",
    "kitchen",
    "park",
    "station",
    "market",
    "office",
    "room",
    "street",
    "village",
    "library",
    "forest",
    "hotel",
)
_ADJECTIVES = (
    "old",
    "young",
    "small",
    "big",
    "red",
    "quiet",
    "happy",
    "new",
    "tall",
    "clever",
    "bright",
    "heavy",
    "green",
    "strange",
    "cheap",
    "lovely",
)
_TRANSITIVE = (
    ("saw", "see"),
    ("found", "find"),
    ("bought", "buy"),
    ("took", "take"),
    ("carried", "carry"),
    ("liked", "like"),
    ("sold", "sell"),
    ("dropped", "drop"),
    ("kept", "keep"),
    ("chose", "choose"),
    ("moved", "move"),
    ("wanted", "want"),
    ("cleaned", "clean"),
    ("painted", "paint"),
)
_INTRANSITIVE = (
    ("slept", "sleep"),
    ("waited", "wait"),
    ("sat", "sit"),
    ("stood", "stand"),
    ("worked", "work"),
    ("laughed", "laugh"),
    ("danced", "dance"),
)
_AUXILIARIES = ("will", "can", "must", "should", "might")
_DETERMINERS = ("the", "a", "this", "that", "every", "the", "the")
_POSSESSIVES = ("his", "her", "their", "my", "our", "your")
_OWNERS = ("Anna's", "Tom's", "Maria's", "David's", "Sarah's", "Peter's")
_NAMES = ("Anna", "Tom", "Maria", "David", "Sarah", "Peter", "Emma", "James")
_PREPOSITIONS_PLACE = ("in", "near", "behind", "outside", "at")
_PREPOSITIONS_NOUN = ("from", "near", "with")


class _Builder:
    """Collects words and arcs while a sentence is generated; heads are filled in as they become known."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.heads: list[int | None] = []
        self.relations: list[str] = []

    def add(self, word: str, relation: str, head: int | None = None) -> int:
        self.words.append(word)
        self.heads.append(head)
        self.relations.append(relation)
        return len(self.words) - 1

    def attach(self, index: int, head: int) -> None:
        self.heads[index] = head


def _noun_phrase(b: _Builder, rng: random.Random, nouns: Sequence[str], allow_name: bool) -> int:
    """Adds (modifiers +) noun; returns the noun's index. Modifiers are attached to it."""
    kind = rng.choices(("det", "poss", "owner", "name"), weights=(6, 3, 1, 1 if allow_name else 0))[0]
    if kind == "name":
        return b.add(rng.choice(_NAMES), "?")
    modifiers = []
    if kind == "det":
        modifiers.append(b.add(rng.choice(_DETERMINERS), "det"))
    elif kind == "poss":
        modifiers.append(b.add(rng.choice(_POSSESSIVES), "poss"))
    else:
        modifiers.append(b.add(rng.choice(_OWNERS), "poss"))
    n_adjectives = rng.choices((0, 1, 2), weights=(5, 4, 1))[0]
    for adjective in rng.sample(_ADJECTIVES, n_adjectives):
        modifiers.append(b.add(adjective, "amod"))
    noun = b.add(rng.choice(nouns), "?")
    if b.words[modifiers[0]] == "a" and b.words[modifiers[0] + 1][0] in "aeiou":
        b.words[modifiers[0]] = "an"
    for m in modifiers:
        b.attach(m, noun)
    return noun


def _prepositional_phrase(b: _Builder, rng: random.Random, attach_to: int, prepositions: Sequence[str]) -> None:
    prep = b.add(rng.choice(prepositions), "prep", head=attach_to)
    noun = _noun_phrase(b, rng, _PLACES, allow_name=False)
    b.relations[noun], b.heads[noun] = "pobj", prep


def _one_sentence(rng: random.Random) -> Sentence:
    b = _Builder()
    subject = _noun_phrase(b, rng, _ANIMATE, allow_name=True)
    b.relations[subject] = "nsubj"
    if rng.random() < 0.15:  # a prepositional phrase on the subject: "the dog from the market ..."
        _prepositional_phrase(b, rng, subject, _PREPOSITIONS_NOUN)
    auxiliary = b.add(rng.choice(_AUXILIARIES), "aux") if rng.random() < 0.25 else None
    transitive = rng.random() < 0.8
    past, base = rng.choice(_TRANSITIVE if transitive else _INTRANSITIVE)
    verb = b.add(base if auxiliary is not None else past, "root", head=-1)
    b.attach(subject, verb)
    if auxiliary is not None:
        b.attach(auxiliary, verb)
    if transitive:
        obj = _noun_phrase(b, rng, _THINGS, allow_name=False)
        b.relations[obj], b.heads[obj] = "dobj", verb
    if not transitive or rng.random() < 0.5:
        _prepositional_phrase(b, rng, verb, _PREPOSITIONS_PLACE)
    b.add(".", "punct", head=verb)
    words = list(b.words)
    words[0] = words[0][0].upper() + words[0][1:]
    return Sentence(tuple(words), tuple(b.heads), tuple(b.relations), "grammar")


def grammar_sentences(n: int = 320, seed: int = 0) -> list[Sentence]:
    """``n`` distinct sentences from the course's small grammar, the same for the same ``seed`` on every machine.

    Subject [aux] verb [object] [prepositional phrase] '.', noun phrases with a determiner, a possessive pronoun or
    a possessor ("Anna's"), up to two adjectives; prepositional phrases on the verb or on the subject.
    """
    rng = random.Random(seed)
    seen, out = set(), []
    while len(out) < n:
        s = _one_sentence(rng)
        if s.words not in seen:
            seen.add(s.words)
            out.append(s)
    return out


# ------------------------------------------------------------------------------------------------- data files
def _data_text(name: str) -> str:
    return resources.files("manyheads.data").joinpath(name).read_text(encoding="utf-8")


def read_conll(text: str, source: str = "natural") -> list[Sentence]:
    """Sentences from the course's 4-column format: ``INDEX WORD HEAD RELATION`` (1-based, head 0 = root),
    '#' comments, a blank line between sentences."""
    sentences, rows = [], []

    def flush() -> None:
        if rows:
            words = tuple(r[1] for r in rows)
            if [int(r[0]) for r in rows] != list(range(1, len(rows) + 1)):
                raise ValueError(f"word indices must run 1..n in: {' '.join(words)}")
            sentences.append(Sentence(words, tuple(int(r[2]) - 1 for r in rows), tuple(r[3] for r in rows), source))
            rows.clear()

    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if not line.strip():
            flush()
            continue
        parts = line.split()
        if len(parts) != 4:
            raise ValueError(f"expected 4 columns, got {line!r}")
        rows.append(parts)
    flush()
    return sentences


@lru_cache(maxsize=1)
def _natural() -> tuple[Sentence, ...]:
    return tuple(read_conll(_data_text("natural_sentences.conll")))


def natural_sentences() -> list[Sentence]:
    """The hand-annotated natural sentences shipped in ``manyheads/data/natural_sentences.conll``."""
    return list(_natural())


def dependency_sentences(n_grammar: int = 320, seed: int = 0) -> list[Sentence]:
    """The syntax probe set of chapter 4: the grammar sentences, then the hand-annotated ones."""
    return grammar_sentences(n_grammar, seed) + natural_sentences()


# ------------------------------------------------------------------------------------------------ coreference
_MALE = ("John", "David", "Peter", "Tom", "James", "Mark", "Paul", "Daniel")
_FEMALE = ("Mary", "Anna", "Sarah", "Emma", "Linda", "Susan", "Kate", "Laura")
# {A} and {B} are the two people; {p} the subject pronoun, {o} the object pronoun (which one is decided per item).
_TEMPLATES = (
    "{A} called {B} because {p} needed some help .",
    "{A} met {B} after {p} had finished work .",
    "{A} thanked {B} when {p} arrived at the party .",
    "When {A} saw {B} , {p} smiled .",
    "{A} told {B} that {p} was going to be late .",
    "{A} visited {B} before {p} left the city .",
    "{A} helped {B} because {p} was very kind .",
    "{A} wrote to {B} while {p} was travelling .",
    "{A} invited {B} and {p} cooked dinner .",
    "{A} waited for {B} but {p} missed the train .",
    "{A} phoned {B} and asked {o} for advice .",
    "{A} showed {B} the letter and {p} started to cry .",
)


def _template_items(n: int, seed: int) -> list[CorefItem]:
    rng = random.Random(seed)
    items = []
    for k in range(n):
        template = _TEMPLATES[k % len(_TEMPLATES)]
        a_male = rng.random() < 0.5
        a = rng.choice(_MALE if a_male else _FEMALE)
        b = rng.choice(_FEMALE if a_male else _MALE)
        refers_to_a = (
            k // len(_TEMPLATES)
        ) % 2 == 0  # half the items each way: the nearest mention is right half the time
        if "{o}" in template:  # "A phoned B and asked him/her": the object pronoun cannot be the subject A
            refers_to_a = False
        male = a_male if refers_to_a else not a_male
        words = template.format(A=a, B=b, p="he" if male else "she", o="him" if male else "her").split()
        pronoun_word = "he" if male else "she"
        if "{o}" in template:
            pronoun_word = "him" if male else "her"
        pronoun = words.index(pronoun_word, 1)
        ia, ib = words.index(a), words.index(b)
        items.append(CorefItem(tuple(words), pronoun, ia if refers_to_a else ib, (ia, ib), "template"))
    return items


def _hand_items() -> list[CorefItem]:
    items = []
    for line in _data_text("coreference.txt").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        words, pronoun, antecedent, candidates = [], None, None, []
        for i, token in enumerate(line.split()):
            mark, word = (token[0], token[1:]) if token[0] in "@^~" and len(token) > 1 else ("", token)
            words.append(word)
            if mark == "@":
                pronoun = i
            elif mark == "^":
                antecedent = i
                candidates.append(i)
            elif mark == "~":
                candidates.append(i)
        if pronoun is None or antecedent is None:
            raise ValueError(f"coreference line needs @pronoun and ^antecedent: {line!r}")
        items.append(CorefItem(tuple(words), pronoun, antecedent, tuple(candidates), "natural"))
    return items


def coreference_items(n_template: int = 120, seed: int = 0) -> list[CorefItem]:
    """Pronoun → antecedent items: ``n_template`` from templates (two people of different genders, so the pronoun
    decides; the antecedent is the farther person in half of them), then the hand-written ones."""
    return _template_items(n_template, seed) + _hand_items()
