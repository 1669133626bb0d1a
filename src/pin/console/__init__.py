"""The operator console: server-rendered HTML under ``/console`` on the API's port (docs/console.md).

``access`` says who may look and act (the platform roles viewer and operator; admin as operator), with a session
cookie or a bearer token, CSRF tokens and the security headers; ``pages`` reads what each page shows; ``http`` is
the router and :func:`pin.console.http.install`, which the composition root calls. Cross-tenant by design: it shows
every tenant's items, and the platform roles open nothing of the business API.
"""
