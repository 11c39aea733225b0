"""docs/contributing.md's extension point is real: a strategy defined outside parbench, in a module
named by `plugins=[...]`, is checked by the orchestrator before launch and applied on every rank."""

from __future__ import annotations

from textwrap import dedent

PLUGIN = dedent('''
    """A throwaway strategy: refuses seed 13, and on every rank records that it ran."""
    from parbench.config import ConfigError
    from parbench.parallel.specs import STRATEGIES, Strategy


    def validate(cfg, dims):
        if cfg.seed == 13:
            raise ConfigError("throwaway refuses seed=13: pick another seed")


    def apply(pmodel, env, cfg):
        pmodel.metrics["throwaway_ranks"] = float(env.world_size)
        return pmodel


    STRATEGIES.register("throwaway")(Strategy(55, lambda dims, cfg: True, "throwaway_strategy:apply", validate))
''')


def test_a_strategy_from_a_plugin_module_is_checked_and_applied(cli):
    (cli.root / "throwaway_strategy.py").write_text(PLUGIN)  # the CLI and its ranks run in cli.root
    refused = cli.run("plugins=[throwaway_strategy]", "seed=13", check=False)
    assert refused.returncode == 2 and "throwaway refuses seed=13" in refused.stderr

    cli.run("plugins=[throwaway_strategy]", "workload.steps=2", "workload.warmup_steps=1", "profile.enabled=false")
    run = cli.runs().iloc[-1]
    assert run["status"] == "FINISHED"
    assert run["metrics.throwaway_ranks"] == 2.0


def test_a_missing_plugin_is_refused_with_the_fix(cli):
    refused = cli.run("plugins=[no_such_plugin]", check=False)
    assert refused.returncode == 2
    assert "no_such_plugin" in refused.stderr and "PYTHONPATH" in refused.stderr
