# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Generate the NUMA Grafana dashboard with grafana-foundation-sdk (pinned in requirements-dev.txt).

    python3 tools/dashboard.py [--check]

Writes roles/numa_monitoring/files/numa-dashboard.json, which the role ships as a ConfigMap the
kube-prometheus-stack dashboard sidecar loads; ``--check`` fails if that file is not what this
script generates (the unit tests run it so). Every query reads only the NUMA exporter's metrics.
"""

import argparse
import json
import os
import sys

from grafana_foundation_sdk.builders import dashboard, prometheus, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import GraphDrawStyle
from grafana_foundation_sdk.models.dashboard import DataSourceRef, VariableRefresh

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(ROOT, "roles", "numa_monitoring", "files", "numa-dashboard.json")
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
NODE = 'node=~"$node"'


def query(expr, legend, instant=False):
    built = prometheus.Dataquery().expr(expr).legend_format(legend)
    return built.instant() if instant else built.range()


def series(title, description, unit, *queries, stacked=False):
    panel = (timeseries.Panel().title(title).description(description).unit(unit).datasource(DATASOURCE)
             .height(8).span(12).draw_style(GraphDrawStyle.LINE).fill_opacity(10 if not stacked else 40))
    for number, (expr, legend) in enumerate(queries):
        panel = panel.with_target(query(expr, legend).ref_id(chr(ord("A") + number)))
    return panel


def build():
    board = (dashboard.Dashboard("NUMA: fill, locality and alignment")
             .uid("numa-kube-numa")
             .description("Per NUMA node memory and CPUs, each pod's NUMA locality, numastat rates and huge "
                          "pages, from numa.kube's NUMA exporter.")
             .tags(["numa", "numa.kube", "kubernetes"])
             .refresh("30s").time("now-1h", "now").timezone("browser").editable()
             .with_variable(dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus"))
             .with_variable(dashboard.QueryVariable("node").label("Node").datasource(DATASOURCE)
                            .query("label_values(numa_node_cpus_online, node)").refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
                            .multi(True).include_all(True).all_value(".*")))
    board = board.with_row(dashboard.Row("NUMA fill"))
    board = board.with_panel(series(
        "Memory in use per NUMA node", "MemTotal - MemFree of each NUMA node as a share of its MemTotal, and the "
        "same without page cache (FilePages), which the kernel can reclaim.", "percentunit",
        ("numa_node_memory_used_bytes{%s} / numa_node_memory_total_bytes{%s} > 0" % (NODE, NODE),
         "{{node}} / NUMA {{numa_node}}"),
        ("(numa_node_memory_used_bytes{%s} - numa_node_memory_file_bytes{%s}) / numa_node_memory_total_bytes{%s} > 0"
         % (NODE, NODE, NODE), "{{node}} / NUMA {{numa_node}} without page cache")))
    board = board.with_panel(series(
        "Free memory per NUMA node", "MemFree of each NUMA node.", "bytes",
        ("numa_node_memory_free_bytes{%s}" % NODE, "{{node}} / NUMA {{numa_node}}")))
    board = board.with_panel(series(
        "Exclusive CPUs per NUMA node", "CPUs kubelet's static CPU manager assigned to containers, against those "
        "it may assign.", "short",
        ("numa_node_cpus_exclusive{%s}" % NODE, "{{node}} / NUMA {{numa_node}} assigned"),
        ("numa_node_cpus_allocatable{%s}" % NODE, "{{node}} / NUMA {{numa_node}} allocatable")))
    board = board.with_panel(series(
        "Memory assigned by kubelet per NUMA node", "Memory kubelet's Static memory manager assigned to "
        "containers, per resource.", "bytes",
        ("numa_node_memory_assigned_bytes{%s}" % NODE, "{{node}} / NUMA {{numa_node}} {{resource}}")))
    board = board.with_row(dashboard.Row("Per-pod locality"))
    board = board.with_panel(
        table.Panel().title("Pod memory per NUMA node").datasource(DATASOURCE).height(8).span(12).unit("bytes")
        .description("Each pod's memory (anon and file pages) on each NUMA node, from its containers' "
                     "memory.numa_stat: a pinned pod keeps nearly all of it on one node.")
        .with_target(query("sum by (node, namespace, pod, numa_node) (numa_container_memory_bytes{%s})" % NODE,
                           "{{namespace}}/{{pod}} NUMA {{numa_node}}", instant=True).ref_id("A").format("table")))
    board = board.with_panel(
        table.Panel().title("Exclusive CPUs per pod and NUMA node").datasource(DATASOURCE).height(8).span(12)
        .description("CPUs kubelet assigned exclusively to each container, by NUMA node (PodResources API).")
        .with_target(query("sum by (node, namespace, pod, container, numa_node) (numa_container_cpus_exclusive{%s})"
                           % NODE, "{{namespace}}/{{pod}}/{{container}} NUMA {{numa_node}}", instant=True)
                     .ref_id("A").format("table")))
    board = board.with_row(dashboard.Row("numastat"))
    board = board.with_panel(series(
        "Page allocations per second", "The kernel's numastat counters per NUMA node: numa_hit (allocated where "
        "intended), numa_miss (intended elsewhere, allocated here), numa_foreign (intended here, allocated "
        "elsewhere).", "ops",
        ('sum by (node, numa_node, event) (rate(numa_node_numastat_pages_total{%s,event=~"numa_hit|numa_miss|numa_foreign"}[$__rate_interval]))'
         % NODE, "{{node}} / NUMA {{numa_node}} {{event}}")))
    board = board.with_panel(series(
        "Miss ratio", "Share of the pages allocated on each NUMA node that were meant for another one.",
        "percentunit",
        ('sum by (node, numa_node) (rate(numa_node_numastat_pages_total{%s,event="numa_miss"}[$__rate_interval]))'
         ' / sum by (node, numa_node) (rate(numa_node_numastat_pages_total{%s,event=~"numa_hit|numa_miss"}[$__rate_interval]))'
         % (NODE, NODE), "{{node}} / NUMA {{numa_node}}")))
    board = board.with_row(dashboard.Row("Huge pages"))
    board = board.with_panel(series(
        "Free huge pages per NUMA node", "Free huge pages of each size on each NUMA node, against those reserved.",
        "short",
        ("numa_node_hugepages_free{%s}" % NODE, "{{node}} / NUMA {{numa_node}} {{size}} free"),
        ("numa_node_hugepages{%s}" % NODE, "{{node}} / NUMA {{numa_node}} {{size}} reserved")))
    model = board.build()
    for number, panel in enumerate(model.panels or [], start=1):  # unique ids, as Grafana keeps them
        panel.id_val = number
    return model


def render():
    return json.dumps(build(), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail if the file differs from what would be written")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        with open(OUTPUT) as handle:
            if handle.read() != text:
                sys.stderr.write("%s is not what tools/dashboard.py generates: run it\n" % OUTPUT)
                return 1
        return 0
    with open(OUTPUT, "w") as handle:
        handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
