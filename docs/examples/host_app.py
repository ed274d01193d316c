from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, FastAPI, HTTPException, Request
from troupe import Principal
from troupe.api.app import troupe_router

from examples.records_app import runtime


@dataclass
class User:  # your app's own user, from its own login
    id: str
    name: str
    teams: list[str]
    roles: list[str]


async def current_user(request: Request) -> User:  # your app's own session check
    if request.cookies.get("session") != "alice-session":
        raise HTTPException(401, "log in first")
    return User("u-42", "Alice", ["acme"], ["dba"])


async def troupe_user(user: Annotated[User, Depends(current_user)]) -> Principal:
    return Principal(
        user.id,
        "https://login.example.com",
        user.name,
        resources=frozenset(user.teams),
        roles=frozenset(user.roles),
    )


app = FastAPI()
app.include_router(troupe_router(runtime, identity=troupe_user), prefix="/troupe")

if __name__ == "__main__":  # try it: your login guards Troupe's routes
    from fastapi.testclient import TestClient

    client = TestClient(app)
    print(client.get("/troupe/api/agents").status_code)  # 401: nobody logged in
    print(client.get("/troupe/api/agents", cookies={"session": "alice-session"}).status_code)  # 200
