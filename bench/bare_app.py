"""The yardstick for throughput: a bare FastAPI endpoint that returns a constant."""

from fastapi import FastAPI

app = FastAPI()


@app.get("/constant")
async def constant():
    return {"ok": True}
