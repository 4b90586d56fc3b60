"""Gone: the routers live in their feature folders (api/<feature>/http.py). What is left here re-exports,
for the /ui pages not yet moved to their feature folders (issue 30), the names they import; removed
once they import the new homes."""
