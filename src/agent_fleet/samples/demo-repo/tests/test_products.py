from stockroom.api.pagination import page_links, paginate


def test_paginate_first_page():
    rows = list(range(120))
    page = paginate(rows, 1, page_size=50)
    assert page["items"] == list(range(50))
    assert page["total"] == 120


def test_paginate_clamps_page():
    assert paginate([1, 2, 3], 0)["page"] == 1


def test_links():
    links = page_links("/products", 2, 200, page_size=50)
    assert "prev" in links and "next" in links
