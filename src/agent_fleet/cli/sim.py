"""``agent-fleet sim-provider``: the simulated OpenAI- and Anthropic-compatible model server."""

from __future__ import annotations

import typer

from agent_fleet.errors import FleetError

__all__ = ["register"]


def sim_provider(
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(0, min=0, max=65535, help="Port to listen on (0 picks a free one)."),
    latency_median: float | None = typer.Option(None, help="Median latency per call, seconds."),
    latency_sigma: float = typer.Option(0.0, help="Log-normal spread of the latency (0 = fixed)."),
    per_token_latency: float | None = typer.Option(None, help="Extra seconds per output token."),
    rate_429: float | None = typer.Option(None, help="Share of calls answered 429."),
    rate_500: float | None = typer.Option(None, help="Share of calls answered 500."),
    rate_503: float | None = typer.Option(None, help="Share of calls answered 503."),
    rate_529: float | None = typer.Option(None, help="Share of calls answered 529 (503 on the OpenAI endpoint)."),
    rate_stall: float | None = typer.Option(None, help="Share of calls that hang before answering or dropping."),
    stall_seconds: float | None = typer.Option(None, help="How long a stalled call hangs."),
    max_concurrency: int | None = typer.Option(None, help="Hidden concurrency cap (429 above it)."),
    rpm: int | None = typer.Option(None, help="Hidden requests-per-minute cap."),
    tpm: int | None = typer.Option(None, help="Hidden tokens-per-minute cap."),
    seed: int | None = typer.Option(None, help="Seed of the latency and error-injection RNG."),
    insufficient_quota: bool = typer.Option(False, "--insufficient-quota", help="Refuse every call: quota gone."),
    verifier_refute_pct: float | None = typer.Option(None, help="Percent of verifier verdicts that refute."),
    edits: bool = typer.Option(
        False, "--edits", help="The simulated agent also fixes what it can (a mechanical fix per finding)."
    ),
) -> None:
    """Serve a simulated OpenAI- and Anthropic-compatible model API until interrupted."""
    # Imported here so other commands do not pay for the server's imports.
    from agent_fleet.sim.provider import build_config, run_server

    try:
        config = build_config(
            latency_median=latency_median,
            latency_sigma=latency_sigma,
            per_output_token_s=per_token_latency,
            rate_429=rate_429,
            rate_500=rate_500,
            rate_503=rate_503,
            rate_529=rate_529,
            rate_stall=rate_stall,
            stall_seconds=stall_seconds,
            max_concurrency=max_concurrency,
            rpm=rpm,
            tpm=tpm,
            seed=seed,
            insufficient_quota=insufficient_quota or None,
            verifier_refute_pct=verifier_refute_pct,
            edits=edits or None,
        )
    except FleetError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None

    def announce(url: str) -> None:
        typer.echo(url)

    try:
        run_server(config, host=host, port=port, announce=announce)
    except OSError as exc:
        typer.echo(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}", err=True)
        raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("sim-provider")(sim_provider)
