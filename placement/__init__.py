"""Pure domain core of exclusive-placement.

Takes and returns plain data (dicts as decoded from Kubernetes JSON). Never imports FastAPI, uvicorn,
httpx or the kubernetes client: HTTP and API calls live at the edges (webhook/, resizer/).
"""
