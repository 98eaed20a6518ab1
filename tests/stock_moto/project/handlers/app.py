"""The shop's jobs (a user's own module: a module-level app, configured by its environment)."""

from __future__ import annotations

from sqsjobs import JobApp, PermanentError

#: what the receipt job did, in order (the tests read it)
sent: list[int] = []
#: called inside the job, when a test wants something to happen while it runs
during: list = []


def make_app() -> JobApp:
    """The app; one per Lambda container."""
    app = JobApp()
    app.rate_limit("mail", rate=1, per=60.0)  # the mail provider's quota: one a minute

    @app.job("newsletter", key="newsletter:{user_id}", limits=["mail"])
    def send_newsletter(user_id: int) -> None:
        sent.append(user_id)

    @app.job("receipt", key="receipt:{order_id}")
    def send_receipt(order_id: int) -> None:
        if order_id < 0:
            raise PermanentError(f"order {order_id} does not exist")
        sent.append(order_id)
        for hook in list(during):
            hook(order_id)

    return app


app = make_app()
send_receipt = app.jobs["receipt"]
send_newsletter = app.jobs["newsletter"]
