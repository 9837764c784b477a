"""Model calls, streaming: Anthropic Messages, OpenAI Responses, Chat Completions.

`neutral.py` holds the request and the parts every dialect reads its
stream into; `anthropic.py`, `responses.py` and `chat.py` are the three
dialects (request body, headers, stream parser); `sse.py` reads
server-sent events; `stream.py` runs the streams behind
`lispm/model-stream` and `lispm/model-cancel` and sends Emacs the
`lispm/model-event`s.
"""
