"""kvplan's faces: the CLI (standard library only) and the web app (``kvplan[web]``)."""
