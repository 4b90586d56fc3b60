"""Parsing and checking a teacher model's answer into trajectory steps (pure logic, no model)."""

from __future__ import annotations

import json

import pytest

from search.relabel.teacher import TeacherAnswerError, parse_teacher_answer, teacher_answer_schema

CODE = 'extern "C" void saxpy(int n, float a, const float* x, float* y) { /* cuda */ }\n'


def steps(*methods: str, code: str = CODE) -> list[dict[str, str]]:
    return [{"method": m, "think": f"why {m}", "detail": f"apply {m}", "code": code} for m in methods]


def test_bare_fenced_and_wrapped_json_give_the_same_steps() -> None:
    answer = json.dumps({"steps": steps("Parallelization", "Loop unrolling")})
    bare = parse_teacher_answer(answer, entry="saxpy")
    assert [s.method for s in bare] == ["Parallelization", "Loop unrolling"]
    assert bare[0].code == CODE and bare[1].think == "why Loop unrolling"
    fenced = parse_teacher_answer(f"Here you go:\n```json\n{answer}\n```\n", entry="saxpy")
    wrapped = parse_teacher_answer(f"Sure. {answer} Hope this helps.", entry="saxpy")
    as_list = parse_teacher_answer(json.dumps(steps("Parallelization", "Loop unrolling")), entry="saxpy")
    assert fenced == bare == wrapped == as_list


def test_code_fenced_inside_the_json_string_is_unwrapped() -> None:
    answer = json.dumps({"steps": steps("Parallelization", code=f"```cuda\n{CODE}```")})
    [step] = parse_teacher_answer(answer, entry="saxpy")
    assert step.code == CODE


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("I would parallelize the loop.", "not JSON"),
        (json.dumps({"steps": []}), "steps"),
        (json.dumps({"steps": [{"method": "Tiling", "think": "t"}]}), "steps.0.code"),
        (json.dumps({"trajectory": steps("Tiling")}), "steps"),
        (json.dumps({"steps": steps("Tiling", code="int main() { return 0; }")}), "does not define `saxpy`"),
        (json.dumps({"steps": steps("A", "B", "C")}), "more than 2"),
    ],
)
def test_bad_answers_are_refused_with_the_reason(answer: str, reason: str) -> None:
    with pytest.raises(TeacherAnswerError, match=reason):
        parse_teacher_answer(answer, entry="saxpy", max_steps=2)


def test_kernel_tasks_need_the_global_kernel() -> None:
    kernel = "__global__ void scale(float* x) { x[threadIdx.x] *= 2; }\n"
    answer = json.dumps({"steps": steps("Vectorization", code=kernel)})
    assert parse_teacher_answer(answer, entry="scale", kind="kernel")[0].code == kernel
    with pytest.raises(TeacherAnswerError, match="does not define"):
        parse_teacher_answer(answer, entry="other", kind="kernel")


def test_schema_bounds_the_steps_and_requires_every_field() -> None:
    schema = teacher_answer_schema(3)
    items = schema["properties"]["steps"]
    assert (items["minItems"], items["maxItems"]) == (1, 3)
    assert items["items"]["required"] == ["method", "think", "detail", "code"]
    assert schema["required"] == ["steps"] and schema["additionalProperties"] is False
