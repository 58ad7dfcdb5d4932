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


def _home(frame: str, typed: str, banner: str = "Sign in") -> str:
    box = (
        f'    [{frame}e3] textbox "Search products" [active]: {typed}'
        if typed
        else f'    [{frame}e3] textbox "Search products"'
    )
    return "\n".join(
        [
            f"[{frame}e1] generic [active]:",
            f"  [{frame}e2] banner:",
            box,
            f'    [{frame}e4] button "Go"',
            f'    [{frame}e5] link "{banner}":',
            f"      /url: /{banner.lower().replace(' ', '')}",
            f"  [{frame}e6] main:",
            f'    [{frame}e7] heading "Welcome" [level=1]',
        ]
    )


def test_a_search_from_a_focused_box_shows_this_steps_query() -> None:
    # The box the agent typed into is focused: its value follows "[active]", and must still be carried.
    def go(name: str, pid: int, price: str) -> dict:
        return {
            "goal": f"What is the price of the {name} in the shop?",
            "obs": obs("/", "Home", _home("", name)),
            "action": "click('e4')",
            "next_obs": obs(
                f"/search?q={pid}", f"Search results for “{name}”", search_page("f1", name, pid, price)
            ),
        }

    nb, cur = go("Cobalt Eco Mouse", 24, "$134.96"), go("Borealis Eco Litter Box", 203, "$44.34")
    (text,) = NearestNeighbourModel([nb]).predict([(cur["goal"], cur["obs"], cur["action"])])
    pred = apply_delta_text(cur["obs"], text, cur["action"])[0]
    assert "Borealis Eco Litter Box" in pred["axtree"] and "Cobalt" not in pred["axtree"]
    assert pred["title"] == "Search results for “Borealis Eco Litter Box”"


def test_a_followed_link_leads_to_the_page_its_name_titles_or_carries_its_name() -> None:
    from lynn.envs.worldmodel.baselines import MemoryModel

    seen = click_result("Cobalt Eco Mouse", 24, "$134.96")
    known = click_result("Halcyon Smart Notebook", 147, "$11.64")
    memory = MemoryModel([seen, known])
    # An imagined result page: this step's name on the neighbour's link (/product/24).
    cur = obs("/search?q=x", "Search", search_page("f1", "Halcyon Smart Notebook", 24, "$11.64"))
    (text,) = memory.predict([("What is the price of the Halcyon Smart Notebook?", cur, "click('f1e7')")])
    pred = apply_delta_text(cur, text, "click('f1e7')")[0]
    assert pred["url"] == ORIGIN + "/product/147"  # the page its name titles, with that page's price
    assert pred["axtree"] == known["next_obs"]["axtree"]
    # A name no remembered page has: the neighbour's page, showing the link's name.
    cur = obs("/search?q=x", "Search", search_page("f1", "Granite Mini Kite", 24, "$134.96"))
    (text,) = memory.predict([("What is the price of the Granite Mini Kite?", cur, "click('f1e7')")])
    pred = apply_delta_text(cur, text, "click('f1e7')")[0]
    assert pred["url"] == ORIGIN + "/product/24"
    assert 'heading "Granite Mini Kite"' in pred["axtree"] and "Cobalt" not in pred["axtree"]
    assert pred["title"] == "Granite Mini Kite · Lynn Shop"


def test_page_memory_keeps_every_version_and_the_goal_picks_one() -> None:
    from lynn.envs.worldmodel.baselines import PageMemory

    def wishlist(items: list[str]) -> str:
        body = [f'    [e{4 + i}] link "{x}":' for i, x in enumerate(items)] or ["    [e4] paragraph: empty"]
        return "\n".join(["[e1] generic:", "  [e2] main:", '    [e3] heading "My wishlist" [level=1]', *body])

    def arrive(items: list[str]) -> dict:
        return {
            "obs": obs("/", "Home", _home("", "")),
            "action": "click('e5')",
            "next_obs": obs("/wishlist", "Wishlist", wishlist(items)),
        }

    memory = PageMemory([arrive(["Red Mug", "Blue Kettle"]), arrive([])])
    assert "empty" in memory.get("/wishlist")[1]  # no goal: the last seen, as before
    assert "Blue Kettle" in memory.get("/wishlist", "Remove the Blue Kettle from my wishlist.")[1]
    assert len(memory.versions["/wishlist"]) == 2


def test_an_edit_link_of_another_row_shows_that_rows_strings_on_the_remembered_page() -> None:
    from lynn.envs.worldmodel.baselines import MemoryModel

    def grid(frame: str, sku: str, name: str, pid: int) -> str:
        return "\n".join(
            [
                f"[{frame}e1] generic [active]:",
                f"  [{frame}e2] main:",
                f'    [{frame}e3] table "Products grid":',
                f"      [{frame}e4] row:",
                f'        [{frame}e5] cell "{sku}"',
                f'        [{frame}e6] cell "{name}"',
                f"        [{frame}e7] cell:",
                f'          [{frame}e8] link "Edit":',
                f"            /url: /products/{pid}/edit",
            ]
        )

    def edit(frame: str, sku: str, name: str, saved: bool = False) -> str:
        return "\n".join(
            [f"[{frame}e1] generic [active]:", f"  [{frame}e2] main:"]
            + ([f"    [{frame}e3] status: Product saved."] if saved else [])
            + [
                f'    [{frame}e4] heading "Edit product {sku}" [level=1]',
                f'    [{frame}e5] textbox "Name": {name}',
            ]
            + [f'    [{frame}e6] button "Save product"']
        )

    opened = {
        "goal": "Open the edit page of the product with SKU SP-1090.",
        "obs": obs("/products?q=SP-1090", "Products", grid("f1", "SP-1090", "Jump Rope", 90)),
        "action": "click('f1e8')",
        "next_obs": obs("/products/90/edit", "Edit", edit("f2", "SP-1090", "Jump Rope")),
    }
    saved = {  # the same URL reached by a Save click: a later version, not comparable row by row
        "goal": "Set the price of SP-1090 to 20.",
        "obs": obs("/products/90/edit", "Edit", edit("f2", "SP-1090", "Jump Rope")),
        "action": "click('f2e6')",
        "next_obs": obs("/products/90/edit", "Edit", edit("f3", "SP-1090", "Jump Rope", saved=True)),
    }
    memory = MemoryModel([opened, saved])
    # An imagined grid: this step's SKU and name on the row, the Edit link's URL still the neighbour's.
    cur = obs("/products?q=BO-1056", "Products", grid("f1", "BO-1056", "Atlas", 90))
    goal = "Open the edit page of the product with SKU BO-1056."
    (text,) = memory.predict([(goal, cur, "click('f1e8')")])
    pred = apply_delta_text(cur, text, "click('f1e8')")[0]
    assert 'heading "Edit product BO-1056"' in pred["axtree"] and 'textbox "Name": Atlas' in pred["axtree"]
    assert "saved" not in pred["axtree"] and 'button "Save product"' in pred["axtree"]
    # The row the page was reached from in training: the page as remembered.
    (text,) = memory.predict([(opened["goal"], opened["obs"], "click('f1e8')")])
    assert apply_delta_text(opened["obs"], text, "click('f1e8')")[0]["axtree"] == opened["next_obs"]["axtree"]
