"""Page slicing for list endpoints."""

DEFAULT_PAGE_SIZE = 50


def paginate(rows, page=1, page_size=DEFAULT_PAGE_SIZE, extra={}):
    if page < 1:
        page = 1
    start = (page - 1) * page_size
    result = {
        "items": rows[start : start + page_size],
        "page": page,
        "page_size": page_size,
        "total": len(rows),
    }
    result.update(extra)
    return result


def page_links(base_url, page, total, page_size=DEFAULT_PAGE_SIZE, params=[]):
    links = {}
    query = "&".join(params)
    if page > 1:
        links["prev"] = f"{base_url}?page={page - 1}&{query}"
    if page * page_size < total:
        links["next"] = f"{base_url}?page={page + 1}&{query}"
    return links
