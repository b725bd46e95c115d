"""A second offline ADK agent for chatkit-trace: a trip planner with five tools.

Same scripted google-genai client as ``chatkit_peer`` (the real ADK code
above the model call), another agent: ``get_weather``, ``get_time``,
``book_hotel`` (always raises: ADK sends an ``errorCode`` event and an
``{"error"}`` frame), ``find_flight`` (answers ``{"status": "error"}``: a
tool result that reports a failure) and ``check_visa`` (takes 20 s: a run
stopped while its tool runs).  The scenario is picked from the text
of the latest user message and the number of tool results since it:

  "both"    -> text, then get_weather and get_time in ONE model turn, then an answer
  "chain"   -> get_weather, then text + get_time, then an answer (two tool turns)
  "book"    -> text + book_hotel, which raises
  "flight"  -> find_flight (soft error result), then an apology
  "long"    -> a thought, then 30 lines of text, then "Enjoy!"
  "slow"    -> one chunk every 0.3 s for ~70 s; stopped by closing the stream
  "visa"    -> text + check_visa, which takes 20 s; stopped by closing the
               stream while the tool runs
  else      -> a two-chunk greeting
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from google import genai
from google.adk.agents import LlmAgent
from google.adk.models import Gemini
from google.genai import types


def _chunk(
    parts: list[types.Part],
    finish_reason: types.FinishReason | None = None,
    finish_message: str | None = None,
) -> types.GenerateContentResponse:
  return types.GenerateContentResponse(
      candidates=[
          types.Candidate(
              index=0,
              content=types.Content(role="model", parts=parts),
              finish_reason=finish_reason,
              finish_message=finish_message,
          )
      ],
      model_version="scripted-offline-1",
      usage_metadata=types.GenerateContentResponseUsageMetadata(
          prompt_token_count=10,
          candidates_token_count=len(parts),
          total_token_count=10 + len(parts),
      )
      if finish_reason
      else None,
  )


def _latest_user_text(contents: list[types.Content]) -> str:
  for content in reversed(contents or []):
    if content.role != "user":
      continue
    texts = [p.text for p in (content.parts or []) if p.text]
    if texts:
      return " ".join(texts)
  return ""


def _last_is_tool_result(contents: list[types.Content]) -> bool:
  if not contents:
    return False
  last = contents[-1]
  return any(p.function_response for p in (last.parts or []))



# Tools
def get_weather(city: str) -> dict[str, Any]:
  """Returns the current weather for a city (canned, offline)."""
  return {"city": city, "condition": "rainy", "temperature_c": 14}


def get_time(city: str) -> dict[str, Any]:
  """Returns the local time in a city (canned)."""
  return {"city": city, "time": "09:30"}


def book_hotel(city: str, nights: int) -> dict[str, Any]:
  """Books a hotel (always fails: the booking backend is down)."""
  raise RuntimeError("booking backend unavailable")


def find_flight(city: str) -> dict[str, Any]:
  """Finds a flight; reports a soft error."""
  return {"status": "error", "error_message": f"no flights to {city} today"}


async def check_visa(country: str) -> dict[str, Any]:
  """Checks the visa rules for a country (slow: 20 s)."""
  await asyncio.sleep(20)
  return {"country": country, "visa": "not required"}


def _n_tool_results(contents) -> int:
  n = 0
  for content in reversed(contents or []):
    if content.role == "user" and any(p.text for p in (content.parts or [])):
      break
    n += sum(1 for p in (content.parts or []) if p.function_response)
  return n


def _call(name, **args):
  return types.Part(function_call=types.FunctionCall(name=name, args=args))


def _script(contents) -> list[Any]:
  text = _latest_user_text(contents).lower()
  done = _n_tool_results(contents)
  if "both" in text:
    if done == 0:
      return [_chunk([types.Part(text="Checking two things.")]), 0.05,
              _chunk([_call("get_weather", city="Oslo"), _call("get_time", city="Oslo")], finish_reason=types.FinishReason.STOP)]
    return [_chunk([types.Part(text="Oslo: rainy, 14 C, ")]), 0.05,
            _chunk([types.Part(text="local time 09:30.")], finish_reason=types.FinishReason.STOP)]
  if "chain" in text:
    if done == 0:
      return [_chunk([_call("get_weather", city="Rome")], finish_reason=types.FinishReason.STOP)]
    if done == 1:
      return [_chunk([types.Part(text="Now the time.")]), 0.05,
              _chunk([_call("get_time", city="Rome")], finish_reason=types.FinishReason.STOP)]
    return [_chunk([types.Part(text="Rome is rainy ")]), 0.05, _chunk([types.Part(text="at 09:30.")], finish_reason=types.FinishReason.STOP)]
  if "book" in text:
    if done == 0:
      return [_chunk([types.Part(text="Booking now.")]), 0.05,
              _chunk([_call("book_hotel", city="Lima", nights=2)], finish_reason=types.FinishReason.STOP)]
    return [_chunk([types.Part(text="Booked.")], finish_reason=types.FinishReason.STOP)]
  if "flight" in text:
    if done == 0:
      return [_chunk([_call("find_flight", city="Lima")], finish_reason=types.FinishReason.STOP)]
    return [_chunk([types.Part(text="Sorry, ")]), 0.05, _chunk([types.Part(text="no flights today.")], finish_reason=types.FinishReason.STOP)]
  if "visa" in text:
    if done == 0:
      return [_chunk([types.Part(text="Checking the visa rules.")]), 0.05,
              _chunk([_call("check_visa", country="Peru")], finish_reason=types.FinishReason.STOP)]
    return [_chunk([types.Part(text="No visa needed.")], finish_reason=types.FinishReason.STOP)]
  if "long" in text:
    out: list[Any] = [_chunk([types.Part(text="Thinking about a long plan.", thought=True)])]
    for i in range(1, 31):
      out.append(_chunk([types.Part(text=f"{i}. Day {i}: walk, museum, dinner by the river.\n")]))
      out.append(0.01)
    out.append(_chunk([types.Part(text="Enjoy!")], finish_reason=types.FinishReason.STOP))
    return out
  if "slow" in text:
    script: list[Any] = []
    for i in range(240):
      script.append(_chunk([types.Part(text=f"step {i} ")]))
      script.append(0.3)
    script.append(_chunk([types.Part(text="end")], finish_reason=types.FinishReason.STOP))
    return script
  return [_chunk([types.Part(text="Hi! ")]), 0.05, _chunk([types.Part(text="Where do you want to go?")], finish_reason=types.FinishReason.STOP)]


class _ScriptedModels:
  """Stands in for `client.aio.models` (only the two methods ADK calls)."""

  async def generate_content_stream(
      self, *, model: str, contents: Any, config: Any = None
  ) -> AsyncIterator[types.GenerateContentResponse]:
    script = _script(contents)

    async def agen() -> AsyncIterator[types.GenerateContentResponse]:
      for step in script:
        if isinstance(step, float):
          await asyncio.sleep(step)
        elif isinstance(step, BaseException):
          raise step
        else:
          yield step

    return agen()

  async def generate_content(
      self, *, model: str, contents: Any, config: Any = None
  ) -> types.GenerateContentResponse:
    """Non-streaming call: merge the script into one response."""
    parts: list[types.Part] = []
    finish = None
    message = None
    for step in _script(contents):
      if isinstance(step, BaseException):
        raise step
      if isinstance(step, float):
        continue
      cand = step.candidates[0]
      for part in cand.content.parts or []:
        # A real non-streaming reply carries one text part per run of text,
        # so merge consecutive text parts of the same kind (thought or not).
        if (
            part.text
            and parts
            and parts[-1].text
            and bool(parts[-1].thought) == bool(part.thought)
        ):
          parts[-1] = types.Part(
              text=parts[-1].text + part.text, thought=part.thought
          )
        else:
          parts.append(part)
      finish = cand.finish_reason or finish
      message = cand.finish_message or message
    return _chunk(parts, finish_reason=finish, finish_message=message)


def _scripted_client() -> genai.Client:
  # A real Client object (so ADK's type checks pass); no request ever leaves
  # the process because the model methods are replaced below.
  client = genai.Client(api_key="offline-scripted-key")
  scripted = _ScriptedModels()
  client.aio.models.generate_content_stream = scripted.generate_content_stream
  client.aio.models.generate_content = scripted.generate_content
  return client



root_agent = LlmAgent(
    name="trip_agent",
    model=Gemini(model="gemini-2.5-flash", client=_scripted_client()),
    description="Offline scripted travel agent.",
    instruction="You plan trips.",
    tools=[get_weather, get_time, book_hotel, find_flight, check_visa],
)
