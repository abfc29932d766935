"""`txcoord provision`: a group's own topics on a cluster, and the ACLs that keep it apart.

For the per-group topic layout (`[kafka] topics_per_group = true`, coordinator/core/topics.py) on a
cluster txcoord does not run itself (a managed Kafka)::

    txcoord provision --config prod.toml --group orders=orders-app --operator ops-admin

creates `txcoord.half.orders`, `txcoord.op.orders` (LogAppendTime) and `txcoord.check.orders`
(sized for check records), and `txcoord.operator.ops-admin`, with the `[kafka]` credentials
of the configuration (they must be allowed to create topics), then prints the ACLs a cluster
administrator grants, as `kafka-acls.sh` commands. Creating a topic that exists changes
nothing, so it is safe to run again. `txcoord up --auth-file` does all of this itself for
the local broker.

Last it checks what it can of the engine's own topics (coordinator/admin/shared_topics.py):
its operator topic, where the REST ingress's admin ops go and any operator name is taken as
written, and the shared half and op topics of the heartbeats. A cluster without an
authorizer, one that lets everyone in where no ACL is found, or a grant (a prefixed
`txcoord.` one, say) that lets another principal write them lets that principal act as any
operator. Each finding is printed as a warning, and the command exits 2 (the topics are
created all the same).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import click

from coordinator.commands.options import configuration_options
from coordinator.core.config import load_config, parse_overrides
from coordinator.core.errors import ConfigurationError
from coordinator.core.topics import grants, group_topic_problem, principal_problem


def _group_of(value: str) -> tuple[str, str | None]:
    group, _, principal = value.partition("=")
    return group, principal or None


@click.command()
@configuration_options("its [kafka] cluster, credentials and topic names")
@click.option(
    "--group",
    "groups",
    multiple=True,
    metavar="GROUP[=PRINCIPAL]",
    help="A producer group, and the SASL user its producers log in as (for its ACLs; repeatable).",
)
@click.option(
    "--operator",
    "operators",
    multiple=True,
    metavar="PRINCIPAL",
    help="An operator's SASL user: its own operator topic and its ACL (repeatable).",
)
def provision(
    *,
    config_file: Path | None,
    overrides: tuple[str, ...],
    groups: tuple[str, ...],
    operators: tuple[str, ...],
) -> None:
    """Create producer groups' and operators' own topics; print the ACLs to grant."""
    config = load_config(config_file, os.environ, parse_overrides(list(overrides)))
    layout = config.kafka.layout
    if not layout.per_group:
        raise ConfigurationError(
            "provision is for the per-group topic layout: set [kafka] topics_per_group = true "
            "(the shared layout needs nothing per group)"
        )
    if not groups and not operators:
        raise click.UsageError("name at least one --group or --operator")
    principals: dict[str, str] = {}
    for group, principal in map(_group_of, groups):
        if problem := group_topic_problem(group, layout):
            raise click.BadParameter(problem, param_hint="--group")
        if principal is not None:
            if problem := principal_problem(principal):
                raise click.BadParameter(problem, param_hint="--group")
            principals[group] = principal
    for operator in operators:
        if problem := principal_problem(operator):
            raise click.BadParameter(problem, param_hint="--operator")
    # Imported here: the admin API only for this command.
    from streams.ingress_topics import ensure_group_topics, ensure_operator_topic  # noqa: PLC0415

    for group, _ in map(_group_of, groups):
        click.echo(f"group {group}: topics {', '.join(ensure_group_topics(config, group))}")
    for operator in operators:
        click.echo(f"operator {operator}: topic {ensure_operator_topic(config, operator)}")
    bootstrap = shlex.quote(config.kafka.bootstrap_servers)
    wanted = grants(layout, principals, operators)
    if wanted:
        click.echo("\nACLs to grant (literal names; run as a cluster administrator):")
    for grant in wanted:
        kind = "--topic" if grant.resource == "TOPIC" else "--group"
        click.echo(
            f"kafka-acls.sh --bootstrap-server {bootstrap} --add --allow-principal "
            f"User:{grant.principal} --operation {grant.operation.capitalize()} {kind} "
            f"{shlex.quote(grant.name)} --resource-pattern-type literal"
        )
    from coordinator.admin.shared_topics import engine_topics, findings  # noqa: PLC0415

    own = ", ".join(engine_topics(config))
    found = findings(config)
    for finding in found:
        click.echo(
            f"warning: the engine's topics ({own}) are not the engine's alone: {finding}", err=True
        )
    if found:
        raise SystemExit(2)
    click.echo(f"\nchecked: only the engine may write its topics ({own})")
