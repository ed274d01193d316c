import asyncio

from pydantic import BaseModel, Field
from troupe import Agent, Runtime, create_tool
from troupe.errors import ResumeDataValidationError
from troupe.testing import FunctionModel, last_tool_message, text, tool_call


class Booking(BaseModel):
    restaurant: str


class Question(BaseModel):  # what the tool asks (its suspend_schema)
    question: str


class Answer(BaseModel):  # what it takes back (its resume_schema)
    people: int = Field(ge=1, le=20)


async def book(inp: Booking, ctx):
    answer = ctx.agent.resume_data  # None the first time; the person's answer when resumed
    if answer is None:
        return await ctx.agent.suspend({"question": f"How many people at {inp.restaurant}?"})
    return {"booked": inp.restaurant, "people": answer.people}


book_table = create_tool(
    "book_table", "Book a table", Booking, book, suspend_schema=Question, resume_schema=Answer
)


def model(messages, tools):
    told = last_tool_message(messages)
    if told is None:
        return tool_call("book_table", {"restaurant": "Chez Ada"}, id="call-1")
    return text(f"Booked: {told['content']}")


agent = Agent("bookings", model=FunctionModel(model), tools=[book_table])


async def main():
    runtime = Runtime([agent], executor="local")
    paused = await agent.generate("Book us a table at Chez Ada")
    print(paused.finish_reason, paused.suspend_payload["suspend_payload"])
    try:
        await agent.resume_generate({"people": 0}, run_id=paused.run_id)  # not in 1..20
    except ResumeDataValidationError as error:
        print("refused:", error.code, "- the run is still paused")
    done = await agent.resume_generate({"people": 4}, run_id=paused.run_id)
    print(done.text)
    await runtime.shutdown()


asyncio.run(main())
