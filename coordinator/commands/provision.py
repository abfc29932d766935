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

It also prints the grants of the engine's own principal that a newer coordinator's fence
rests on (coordinator/core/topics.py `engine_grants`): WRITE and DESCRIBE on the two
transactional ids of the configuration's warehouse, those of its check and notice producers
(streams/kafka_io/kafka_fence.py). Without them the engine does not start.

    txcoord provision --config prod.toml --consumer-group billing=billing-app

creates SDK consumer group `billing`'s own offsets topic, `txcoord.consumer-offsets.billing`
(compacted, coordinator/kafka_clients/offsets_topic.py), and prints its principal's grants
(coordinator/core/topics.py `consumer_grants`): read and write on that topic, read on the
deliveries topic and on its Kafka consumer group; none on another group's offsets. The
local stack's auth file names no SDK consumer group: there too, this makes a group's topic.
It then looks for grants that let another principal write such a group's offsets topic (a
prefixed one, say: coordinator/admin/offsets_acls.py): each is a warning, and exit code 2.

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
from coordinator.core.topics import (
    Grant,
    TopicLayout,
    consumer_grants,
    consumer_group_topic_problem,
    engine_grants,
    grants,
    group_topic_problem,
    principal_problem,
)
from coordinator.kafka_clients.offsets_topic import ensure_offsets_topic

#: kafka-acls.sh's option naming a resource of each kind (coordinator/core/topics.py Grant).
_RESOURCE_OPTIONS = {
    "TOPIC": "--topic",
    "GROUP": "--group",
    "TRANSACTIONAL_ID": "--transactional-id",
}


def _acl_command(bootstrap: str, grant: Grant) -> str:
    """Return the kafka-acls.sh command that adds `grant` (`bootstrap` shell-quoted)."""
    return (
        f"kafka-acls.sh --bootstrap-server {bootstrap} --add --allow-principal "
        f"User:{grant.principal} --operation {grant.operation.capitalize()} "
        f"{_RESOURCE_OPTIONS[grant.resource]} {shlex.quote(grant.name)} "
        "--resource-pattern-type literal"
    )


def _group_of(value: str) -> tuple[str, str | None]:
    group, _, principal = value.partition("=")
    return group, principal or None


def _consumer_principals(values: tuple[str, ...], layout: TopicLayout) -> dict[str, str]:
    """Return consumer group -> principal of the `--consumer-group` values that name one;
    raise click.BadParameter for a name no offsets topic or ACL can hold."""
    found: dict[str, str] = {}
    for group, principal in map(_group_of, values):
        problem = consumer_group_topic_problem(group, layout)
        if problem is None and principal is not None:
            problem = principal_problem(principal)
        if problem is not None:
            raise click.BadParameter(problem, param_hint="--consumer-group")
        if principal is not None:
            found[group] = principal
    return found


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
@click.option(
    "--consumer-group",
    "consumer_groups",
    multiple=True,
    metavar="GROUP[=PRINCIPAL]",
    help="An SDK consumer group, and the SASL user its members log in as: its own offsets "
    "topic and its ACLs (repeatable).",
)
def provision(
    *,
    config_file: Path | None,
    overrides: tuple[str, ...],
    groups: tuple[str, ...],
    operators: tuple[str, ...],
    consumer_groups: tuple[str, ...],
) -> None:
    """Create producer groups' and operators' own topics; print the ACLs to grant."""
    config = load_config(config_file, os.environ, parse_overrides(list(overrides)))
    layout = config.kafka.layout
    if not layout.per_group:
        raise ConfigurationError(
            "provision is for the per-group topic layout: set [kafka] topics_per_group = true "
            "(the shared layout needs nothing per group)"
        )
    if not groups and not operators and not consumer_groups:
        raise click.UsageError("name at least one --group, --operator or --consumer-group")
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
    consumers = _consumer_principals(consumer_groups, layout)
    # Imported here: the admin API only for this command.
    from streams.kafka_io.ingress_topics import ensure_group_topics, ensure_operator_topic  # noqa: PLC0415

    for group, _ in map(_group_of, groups):
        click.echo(f"group {group}: topics {', '.join(ensure_group_topics(config, group))}")
    for operator in operators:
        click.echo(f"operator {operator}: topic {ensure_operator_topic(config, operator)}")
    for consumer, _ in map(_group_of, consumer_groups):
        topic = ensure_offsets_topic(config.kafka, consumer)
        click.echo(f"consumer group {consumer}: offsets topic {topic}")
    bootstrap = shlex.quote(config.kafka.bootstrap_servers)
    wanted = grants(layout, principals, operators) + consumer_grants(layout, consumers)
    if wanted:
        click.echo("\nACLs to grant (literal names; run as a cluster administrator):")
    for grant in wanted:
        click.echo(_acl_command(bootstrap, grant))
    engine = engine_grants(config.kafka.principal, config.warehouse)
    click.echo(
        f"\nThe engine's principal (User:{config.kafka.principal}) needs these too, for the "
        "transactional producers of its check records and delivery notices (this warehouse's "
        "ids; a newer coordinator's start fences an older one's with them):"
    )
    for grant in engine:
        click.echo(_acl_command(bootstrap, grant))
    from coordinator.admin.offsets_acls import offsets_findings  # noqa: PLC0415
    from coordinator.admin.shared_topics import engine_topics, findings  # noqa: PLC0415

    own = ", ".join(engine_topics(config))
    found = findings(config)
    for finding in found:
        click.echo(
            f"warning: the engine's topics ({own}) are not the engine's alone: {finding}", err=True
        )
    apart = offsets_findings(config, consumers)
    for finding in apart:
        click.echo(f"warning: a consumer group's offsets are not its own: {finding}", err=True)
    if found or apart:
        raise SystemExit(2)
    click.echo(f"\nchecked: only the engine may write its topics ({own})")
    if consumers:
        click.echo("checked: only each consumer group's principal may write its offsets topic")
