"""The template reader the rules share, on raw SAM (before cfn-lint merges Globals) and CloudFormation."""

from __future__ import annotations

import json

from template_support import cfn_template, load_template, mutate, sam_template

from sqsjobs_rules._wiring import Resolver, Wiring


def test_sam_event_globals_and_defaults() -> None:
    wiring = Wiring(sam_template())
    (source,) = wiring.sources
    assert (source.queue_id, source.function_id, source.batching_window) == ("Jobs", "Worker", 1)
    assert wiring.functions["Worker"].timeout == 60  # Globals -> Ref -> Default
    assert wiring.queues["Jobs"].dead_letter_id == "Dlq"
    assert wiring.queues["Dlq"].retention == 1209600
    assert wiring.queues["Jobs"].retention == 345600  # SQS's default


def test_plain_mapping_by_ref_and_arn() -> None:
    wiring = Wiring(cfn_template())
    (source,) = wiring.sources
    assert (source.queue_id, source.function_id) == ("Jobs", "Worker")
    by_arn = mutate(cfn_template(), "Resources/WorkerJobs/Properties/FunctionName", {"Fn::GetAtt": "Worker.Arn"})
    assert Wiring(by_arn).sources[0].function_id == "Worker"


def test_json_string_redrive_policy_and_sub_arn() -> None:
    policy = json.dumps({"deadLetterTargetArn": "arn:aws:sqs:us-east-1:1:external", "maxReceiveCount": 4})
    template = mutate(cfn_template(), "Resources/Jobs/Properties/RedrivePolicy", policy)
    queue = Wiring(template).queues["Jobs"]
    assert queue.has_redrive and queue.dead_letter_id is None and queue.max_receive_count == 4
    template = mutate(cfn_template(), "Resources/WorkerJobs/Properties/EventSourceArn", {"Fn::Sub": "${Jobs.Arn}"})
    assert Wiring(template).sources[0].queue_id == "Jobs"


def test_resolver_overrides_mappings_and_unknowns() -> None:
    template = {
        "Parameters": {"Size": {"Type": "String", "Default": "small"}, "N": {"Type": "Number", "Default": "5"}},
        "Mappings": {"Timeouts": {"small": {"Seconds": 30}, "large": {"Seconds": 900}}},
    }
    find = {"Fn::FindInMap": ["Timeouts", {"Ref": "Size"}, "Seconds"]}
    assert Resolver(template).number(find) == 30
    assert Resolver(template, {"Size": "large"}).number(find) == 900
    assert Resolver(template).number({"Ref": "Missing"}) is None
    assert Resolver(template).number({"Fn::Sub": "5"}) is None
    # A Ref to a Number parameter keys a mapping by its text (override or default, int or string).
    template["Mappings"]["Plus1"] = {"5": {"Value": 6}, "7": {"Value": 8}}
    plus1 = {"Fn::FindInMap": ["Plus1", {"Ref": "N"}, "Value"]}
    assert Resolver(template).number(plus1) == 6
    assert Resolver(template, {"N": 7}).number(plus1) == 8
    assert Resolver(template, {"N": "9"}).number(plus1) is None


def test_shipped_template_wiring() -> None:
    wiring = Wiring(load_template())
    # Every rule finds both jobs queues by their wiring: each feeds the worker and dead-letters to the DLQ.
    assert sorted((s.queue_id, s.function_id) for s in wiring.sources) == [("CriticalQueue", "WorkerFunction"),
                                                                            ("JobsQueue", "WorkerFunction")]
    assert sorted((s.logical_id, d.logical_id) for s, d in wiring.dead_letter_queues()) == [
        ("CriticalQueue", "DeadLetterQueue"), ("JobsQueue", "DeadLetterQueue")]
    worker = wiring.functions["WorkerFunction"]
    assert worker.timeout == 60
    assert set(worker.environment) >= {"POWERTOOLS_SERVICE_NAME", "SQSJOBS_MAX_ATTEMPTS"}  # Globals merged
