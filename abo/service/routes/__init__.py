"""The HTTP API's routes, one ``APIRouter`` per resource: ``health``, ``studies``, ``trials``
(the lifecycle of a trial), ``results`` (what a study found); ``common`` holds what they share.

``abo.service.app.create_app`` mounts them (and ``abo.service.analysis_routes``). An endpoint
finds the app's ``ServiceState`` through the ``Service`` dependency, so each router is built
once, at import, and serves every app that includes it.
"""
