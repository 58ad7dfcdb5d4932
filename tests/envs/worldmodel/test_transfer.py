"""The nearest neighbour's analogy transfer: the retrieved transition's specifics (its link, its row's
strings, its product) replaced by the current step's, and a reload's edits carried over as edits.

Pages are written by hand in LiveWeb's axtree format (ids ``[f<n>e<k>]``, ``/url:`` lines) so that each
expectation is exact.
"""

from __future__ import annotations

from lynn.envs.worldmodel.baselines import (
    NearestNeighbourModel,
    context_strings,
    edit_transfer,
    substitutions,
)
from lynn.envs.worldmodel.delta import apply_delta_text

ORIGIN = "http://127.0.0.1:5000"


def search_page(frame: str, name: str, pid: int, price: str) -> str:
    return "\n".join(
        [
            f"[{frame}e1] generic [active]:",
            f"  [{frame}e2] main:",
            f'    [{frame}e3] heading "Search results for “{name}”" [level=1]',
            f'    [{frame}e4] table "Products":',
            f"      [{frame}e5] row:",
            f"        [{frame}e6] cell:",
            f'          [{frame}e7] link "{name}":',
            f"            /url: /product/{pid}",
            f'        [{frame}e8] cell "{price}"',
        ]
    )


def product_page(frame: str, name: str, price: str, msg: str | None = None, first: int = 1) -> str:
    n = first
    lines = [f"[{frame}e{n}] generic [active]:", f"  [{frame}e{n + 1}] main:"]
    n += 2
    if msg:
        lines.append(f'    [{frame}e{n}] status: "{msg}"')
        n += 1
    lines += [
        f'    [{frame}e{n}] heading "{name}" [level=1]',
        f'    [{frame}e{n + 1}] paragraph: "Price: {price}"',
        f'    [{frame}e{n + 2}] button "Add to cart"',
    ]
    return "\n".join(lines)


def obs(url: str, title: str, axtree: str) -> dict[str, str]:
    return {"url": ORIGIN + url, "title": title, "axtree": axtree}


def click_result(name: str, pid: int, price: str) -> dict:
    return {
        "task_id": f"shop.product_price.{pid}",
        "goal": f"What is the price of “{name}”?",
        "obs": obs(f"/search?q={pid}", "Search", search_page("f1", name, pid, price)),
        "action": "click('f1e7')",
        "next_obs": obs(f"/product/{pid}", f"{name} · Lynn Shop", product_page("f2", name, price)),
    }


def test_context_strings_and_substitutions_pair_the_same_places() -> None:
    nb = click_result("Cobalt Eco Mouse", 24, "$134.96")
    cur = click_result("Halcyon Smart Notebook", 147, "$11.64")
    a = context_strings(nb["goal"], nb["obs"], nb["action"])
    b = context_strings(cur["goal"], cur["obs"], cur["action"])
    assert a[("target",)] == "Cobalt Eco Mouse" and b[("row", 1)] == "$11.64"
    assert a[("goal", 0)] == "Cobalt Eco Mouse"
    subs = substitutions(a, b)
    assert ("Cobalt Eco Mouse", "Halcyon Smart Notebook") in subs and ("$134.96", "$11.64") in subs
    assert [len(x) for x, _ in subs] == sorted((len(x) for x, _ in subs), reverse=True)
    # A neighbour string that would map to two different strings is dropped.
    assert substitutions({("a",): "xx", ("b",): "xx"}, {("a",): "p", ("b",): "q"}) == []


def test_nearest_neighbour_transfers_the_link_and_the_row_to_the_current_step() -> None:
    nb = click_result("Cobalt Eco Mouse", 24, "$134.96")
    cur = click_result("Halcyon Smart Notebook", 147, "$11.64")
    item = (cur["goal"], cur["obs"], cur["action"])
    (text,) = NearestNeighbourModel([nb]).predict([item])
    pred, err, _ = apply_delta_text(cur["obs"], text, cur["action"])
    assert err is None
    assert pred["url"] == ORIGIN + "/product/147"
    assert pred["title"] == "Halcyon Smart Notebook · Lynn Shop"
    assert pred["axtree"] == cur["next_obs"]["axtree"]
    # Without transfer the neighbour's own product and URL come back (the previous behaviour).
    (plain,) = NearestNeighbourModel([nb], transfer=False).predict([item])
    old, _, _ = apply_delta_text(cur["obs"], plain, cur["action"])
    assert old["url"] == ORIGIN + "/product/24" and "Cobalt Eco Mouse" in old["axtree"]


def test_a_reload_is_carried_over_as_edits_with_ids_renumbered() -> None:
    # The neighbour added its product to the cart: same page, a status line, ids after it shifted by one.
    nb = {
        "obs": obs("/product/24", "Mouse", product_page("f2", "Cobalt Eco Mouse", "$134.96")),
        "action": "click('f2e5')",
        "next_obs": obs(
            "/product/24?msg=Added",
            "Mouse",
            product_page("f3", "Cobalt Eco Mouse", "$134.96", msg="Added to cart"),
        ),
    }
    cur = obs("/product/147", "Notebook", product_page("f2", "Halcyon Smart Notebook", "$11.64"))
    want = product_page("f3", "Halcyon Smart Notebook", "$11.64", msg="Added to cart")
    assert edit_transfer(cur, nb) == want
    (text,) = NearestNeighbourModel([{**nb, "task_id": "shop.add_to_cart.0", "goal": ""}]).predict(
        [("", cur, "click('f2e5')")]
    )
    pred, err, _ = apply_delta_text(cur, text, "click('f2e5')")
    assert err is None and pred["axtree"] == want
    # A neighbour that stayed in its document, or replaced its whole page, is not an edit to carry.
    assert edit_transfer(cur, {**nb, "next_obs": {**nb["next_obs"], "axtree": nb["obs"]["axtree"]}}) is None
    other = click_result("Cobalt Eco Mouse", 24, "$134.96")
    assert edit_transfer(other["obs"], other) is None


def _with_header(axtree: str, extra: int, frame: str) -> str:
    """``axtree`` with ``extra`` header links before it and every id after them shifted by ``extra``."""
    import re

    shifted = re.sub(
        r"\[(f\d+)?e(\d+)\]", lambda m: f"[{m.group(1) or ''}e{int(m.group(2)) + extra}]", axtree
    )
    header = [f'[{frame}e{k + 1}] link "Header {k}":' for k in range(extra)]
    return "\n".join([*header, shifted])


def test_a_hunk_lands_under_another_id_and_its_ids_shift_with_the_page() -> None:
    # The neighbour's site header had two more elements than this page's, so its main content sits two
    # ids and two lines further on; its Δ still opens this step's product page, ids as this page numbers them.
    nb = click_result("Cobalt Eco Mouse", 24, "$134.96")
    nb["obs"]["axtree"] = _with_header(nb["obs"]["axtree"], 2, "f1")
    nb["next_obs"]["axtree"] = _with_header(nb["next_obs"]["axtree"], 2, "f2")
    nb["action"] = "click('f1e9')"
    cur = click_result("Halcyon Smart Notebook", 147, "$11.64")
    item = (cur["goal"], cur["obs"], cur["action"])
    (text,) = NearestNeighbourModel([nb]).predict([item])
    pred, err, _ = apply_delta_text(cur["obs"], text, cur["action"])
    assert err is None
    assert pred["axtree"] == cur["next_obs"]["axtree"] and pred["url"] == cur["next_obs"]["url"]
    # Without the transfer the hunk's anchor is not on this page and its index runs past the page's end.
    (plain,) = NearestNeighbourModel([nb], transfer=False).predict([item])
    assert "does not apply" in (apply_delta_text(cur["obs"], plain, cur["action"])[1] or "")


def _form(frame: str, typed: str, sort: str) -> str:
    opts = [
        f'          option "{o}"' + (" [selected]" if o == sort else "") for o in ("new", "top", "comments")
    ]
    return "\n".join(
        [
            f"[{frame}e1] generic [active]:",
            f'  [{frame}e2] form "Filter":',
            f'    [{frame}e3] textbox "Search": {typed}' if typed else f'    [{frame}e3] textbox "Search"',
            f'    [{frame}e4] combobox "Sort by":',
            *opts,
            f'    [{frame}e5] button "Apply"',
        ]
    )


def test_the_typed_value_and_the_selected_option_are_this_steps() -> None:
    def fill(typed: str) -> dict:
        return {
            "goal": "",
            "obs": obs("/f/diy", "DIY", _form("f1", "", "new")),
            "action": f"fill('f1e3', '{typed}')",
            "next_obs": obs("/f/diy", "DIY", _form("f1", typed, "new")),
        }

    nb, cur = fill("gravel routes"), fill("bike fitting")
    (text,) = NearestNeighbourModel([nb]).predict([(cur["goal"], cur["obs"], cur["action"])])
    assert apply_delta_text(cur["obs"], text, cur["action"])[0]["axtree"] == cur["next_obs"]["axtree"]

    def select(option: str) -> dict:
        return {
            "goal": "",
            "obs": obs("/f/diy", "DIY", _form("f1", "", "new")),
            "action": f"select_option('f1e4', '{option}')",
            "next_obs": obs("/f/diy", "DIY", _form("f1", "", option)),
        }

    nb, cur = select("comments"), select("top")
    (text,) = NearestNeighbourModel([nb]).predict([(cur["goal"], cur["obs"], cur["action"])])
    assert apply_delta_text(cur["obs"], text, cur["action"])[0]["axtree"] == cur["next_obs"]["axtree"]


def test_a_filter_forms_query_takes_this_pages_path_and_field_values() -> None:
    def apply(forum: str, typed: str, sort: str) -> dict:
        return {
            "goal": "",
            "obs": obs(f"/f/{forum}", forum, _form("f1", typed, sort)),
            "action": "click('f1e5')",
            "next_obs": obs(
                f"/f/{forum}?q={typed.replace(' ', '+')}&sort={sort}", forum, _form("f2", typed, sort)
            ),
        }

    nb, cur = apply("programming", "rust tips", "top"), apply("diy", "shelf brackets", "comments")
    (text,) = NearestNeighbourModel([nb]).predict([(cur["goal"], cur["obs"], cur["action"])])
    pred = apply_delta_text(cur["obs"], text, cur["action"])[0]
    assert pred["url"] == cur["next_obs"]["url"]
