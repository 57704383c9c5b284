"""Types (Fig. 3): free variables, substitution, equality, matching."""
from kmltal.parser import parse_type as ty
from kmltal.types import (INT, CodeT, SizeOf, TupleT, TVar, alpha_eq, ftv, gamma_leq,
                          instantiate, match, subst, unbound_vars)


def test_printing_round_trips_through_the_parser():
    for text in ("int", "a", "<>", "<int, <int>>", "sizeof(<int, int>)", "sizeof(a)",
                 "forall[]. {}", "forall[a, b]. {r0: a, r1: sizeof(a), r31: b}",
                 "forall[b]. {r0: <int>, r31: forall[c]. {r1: c}}"):
        assert str(ty(text)) == text


def test_free_type_variables():
    assert ftv(ty("forall[a]. {r0: a, r1: b, r2: <c, sizeof(a)>}")) == {"b", "c"}
    assert ftv(ty("<int, sizeof(<int>)>")) == frozenset()


def test_alpha_equivalence():
    assert alpha_eq(ty("forall[a]. {r0: a}"), ty("forall[z]. {r0: z}"))
    assert alpha_eq(ty("forall[a, b]. {r0: a, r1: b}"), ty("forall[b, a]. {r0: b, r1: a}"))
    assert not alpha_eq(ty("forall[a, b]. {r0: a, r1: b}"), ty("forall[a, b]. {r0: b, r1: a}"))
    assert not alpha_eq(ty("forall[a]. {r0: a}"), ty("forall[a]. {r0: a, r1: int}"))
    assert not alpha_eq(ty("forall[a]. {r0: a}"), ty("forall[b]. {r0: a}"))  # free vs bound
    assert not alpha_eq(ty("<int>"), ty("<int, int>"))
    assert not alpha_eq(ty("sizeof(<int>)"), INT)


def test_substitution_avoids_capture():
    t = ty("forall[b]. {r0: a, r1: b}")
    s = subst(t, {"a": TVar("b")})
    assert ftv(s) == {"b"}
    assert alpha_eq(s, ty("forall[c]. {r0: b, r1: c}"))
    assert subst(ty("forall[a]. {r0: a}"), {"a": INT}) == ty("forall[a]. {r0: a}")


def test_instantiate_a_prefix_of_the_variables():
    pk = ty("forall[c, b]. {r0: c, r1: c, r31: b}")
    assert alpha_eq(instantiate(pk, [ty("<int>")]),
                    ty("forall[b]. {r0: <int>, r1: <int>, r31: b}"))
    assert alpha_eq(instantiate(pk, [INT, INT]), ty("forall[]. {r0: int, r1: int, r31: int}"))


def test_sizeof_of_a_substituted_non_tuple_is_representable():
    # The paper's syntax allows sizeof only around tuples and variables;
    # substitution can still produce sizeof(int), a type no word has.
    assert subst(SizeOf(TVar("a")), {"a": INT}) == SizeOf(INT)


def test_matching_finds_the_instantiation():
    binds = {}
    pattern = ty("forall[b]. {r0: a, r1: a, r31: b}")
    target = ty("forall[z]. {r0: <int>, r1: <int>, r31: z}")
    assert match(pattern, target, frozenset({"a"}), binds)
    assert binds == {"a": TupleT((INT,))}
    # a pattern variable cannot capture a variable bound in the target
    assert not match(ty("forall[b]. {r0: a}"), ty("forall[b]. {r0: b}"),
                     frozenset({"a"}), {})
    # inconsistent uses of one variable fail
    assert not match(TupleT((TVar("a"), TVar("a"))), TupleT((INT, TupleT(()))),
                     frozenset({"a"}), {})


def test_register_file_subtyping_forgets_registers():
    big = {1: INT, 2: TupleT((INT,))}
    assert gamma_leq(big, {1: INT})
    assert not gamma_leq({1: INT}, big)
    assert not gamma_leq({1: INT, 2: INT}, big)


def test_well_formedness_rule_type():
    assert unbound_vars(("a",), ty("<a, sizeof(a)>")) == frozenset()
    assert unbound_vars((), ty("<a>")) == {"a"}
    assert unbound_vars((), CodeT(("a", "a"), ())) == {"a"}
