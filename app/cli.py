"""``shardscope serve``: run the web app with uvicorn (``make run`` calls it)."""

from __future__ import annotations

import argparse
import os


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="shardscope", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the app over HTTP")
    serve.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    serve.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    serve.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    args = parser.parse_args(argv)

    import uvicorn
    uvicorn.run("app.main:create_app", factory=True, host=args.host, port=args.port,
                workers=args.workers, log_level="info", access_log=os.environ.get("SHARDSCOPE_ACCESS_LOG") == "1")


if __name__ == "__main__":
    main()
