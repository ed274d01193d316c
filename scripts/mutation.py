"""Targeted mutation run over the decision, claim, checkpoint and recovery code: break one line of product
code at a time, run the tests that guard it, and put it back.

    python scripts/mutation.py                 # every mutant; writes scripts/mutation-report.md
    python scripts/mutation.py --only cas      # mutants whose name contains "cas" (report not written)
    python scripts/mutation.py --list          # and whether each still fits the code (exit 1 if not)

Each mutant is a file, the exact text it replaces (which must occur exactly once, so a mutant that no
longer fits the code fails loudly instead of silently testing nothing) and the replacement. A mutant
that every test survives must carry a written reason it is harmless, or the run fails. The full run
goes by command, like the benchmarks (it takes several minutes); CI runs ``--list``, so a change that
leaves a mutant stale fails there.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "scripts" / "mutation-report.md"


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]
    # Why surviving this mutant is harmless (only for mutants known to survive).
    harmless: str = ""


APPROVAL = ("tests/test_guarantees.py", "tests/test_approval.py")
NOT_INSTALLED_ROUTES = (
    "tests/test_newcomer_errors.py::test_a_server_without_the_a2a_and_mcp_sdks_says_which_extras_serve_those_routes"
)
CHECKPOINT_PAUSE = (
    "        await self.checkpoint(run, thread, pauses, audit=audit, consumed=consumed)\n"
    "        self.paused.keep(state, run.version)  "
    "# this operation ends here: the state is not changed again\n"
    "        # Durable now: announce every open pause, oldest first, so the last one is the newest.\n"
)
ANNOUNCE = """        announced = open_pause_chunks(state)
        for chunk in announced:
            run.emit(chunk)
"""

MUTANTS = [
    # ---- what a model writes reaches a person inert ---------------------------------------------------
    Mutant(
        "hidden-chars-only-the-old-few-categories",
        "core/vocabulary/hidden_chars.py",
        '_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})',
        '_CATEGORIES = frozenset({"Cc", "Cs"})',
        (
            "tests/test_decision_links.py::test_the_page_marks_hidden_characters_and_bounds_a_reason",
            "tests/test_demo.py::test_escape_sequences_the_model_writes_are_shown_not_played",
        ),
    ),
    Mutant(
        "inbox-leaves-tag-characters-unmarked",
        "api/static/inbox.js",
        "[\\p{Cc}\\p{Cf}\\p{Cs}",
        "[\\p{Cc}\\p{Cs}",
        ("tests/test_inbox_browser.py::test_a_card_shows_its_context_and_marks_invisible_characters",),
    ),
    Mutant(
        "inbox-args-box-scrolls-a-padded-argument",
        "api/static/inbox.js",
        "    if (!preview.cut) return [shown];\n",
        "    return [el(\"pre\", { \"data-testid\": \"args\" }, pretty(args))];\n",
        ("tests/test_inbox_browser.py::test_a_padded_argument_cannot_push_the_one_that_matters_out_of_view",),
    ),
    Mutant(
        "inbox-rounds-long-numbers",
        "api/static/inbox.js",
        "  const readJson = (text) => JSON.parse(text, exactly);",
        "  const readJson = (text) => JSON.parse(text);",
        ("tests/test_inbox_browser.py::test_a_number_javascript_cannot_hold_is_shown_as_the_tool_gets_it",),
    ),
    Mutant(
        "notebook-tables-keep-hidden-characters",
        "core/vocabulary/suspended.py",
        "    return [([visible(cell) for cell in cells], call) for cells, call in rows]",
        "    return rows",
        ("tests/test_notebook.py::test_what_a_model_chose_shows_with_its_hidden_characters_marked",),
    ),
    Mutant(
        "notebook-panel-keeps-hidden-characters",
        "troupe/ops/notebook.py",
        "    return html.escape(visible(str(value)))",
        "    return html.escape(str(value))",
        ("tests/test_notebook.py::test_what_a_model_chose_shows_with_its_hidden_characters_marked",),
    ),
    Mutant(
        "elicitation-cuts-arguments-at-the-end",
        "api/mcp_pauses.py",
        "        args = args_preview(call.args)",
        "        args = json.dumps(call.args, ensure_ascii=False)[:2000]",
        ("tests/test_mcp_server.py::test_an_elicitation_shows_every_argument_however_one_is_padded",),
    ),
    Mutant(
        "a2a-status-text-cuts-arguments-at-the-end",
        "api/a2a_tasks.py",
        "{call.tool_name} {args_preview(call.args)} {asks}",
        "{call.tool_name} {json.dumps(call.args, ensure_ascii=False)[:300]} {asks}",
        ("tests/test_a2a_server.py::test_the_status_text_shows_every_argument_however_one_is_padded",),
    ),
    Mutant(
        "inbox-shows-an-approvers-edit-unmarked",
        "api/static/inbox.js",
        "      card.approvals.replaceChildren(\n        ...visible(\n",
        "      card.approvals.replaceChildren(\n        ...String(\n",
        (
            "tests/test_inbox_reach_browser.py::"
            "test_an_earlier_approvers_edit_shows_its_hidden_characters_to_the_next_approver",
        ),
    ),
    Mutant(
        "demo-prints-model-text-raw",
        "troupe/ops/demo.py",
        'print(safe(p["text"], keep=NEWLINE), end="", flush=True)',
        'print(p["text"], end="", flush=True)',
        ("tests/test_demo.py::test_escape_sequences_the_model_writes_are_shown_not_played",),
    ),
    # ---- checkpoint before announce ---------------------------------------------------------------------
    Mutant(
        "announce-before-checkpoint",
        "core/run/loop.py",
        CHECKPOINT_PAUSE + ANNOUNCE,
        ANNOUNCE + CHECKPOINT_PAUSE,
        ("tests/test_guarantees.py", "tests/test_snapshots.py"),
    ),
    Mutant(
        "suspend-without-status",
        "core/run/loop.py",
        """        state.status = "suspended"
""",
        "",
        ("tests/test_guarantees.py", "tests/test_snapshots.py"),
    ),
    Mutant(
        "running-calls-not-checkpointed",
        "core/run/loop.py",
        """            if plan.calls:
                # Calls about to run""",
        """            if False:
                # Calls about to run""",
        ("tests/test_recovery.py",),
    ),
    Mutant(
        "tool-runs-before-its-running-mark-is-durable",
        "core/run/loop.py",
        "                await self.checkpoint(run)\n",
        "                await self.checkpoint(run, ahead=True)\n",
        ("tests/test_guarantees.py",),
    ),
    Mutant(
        "first-write-ahead-of-the-model",
        "core/run/flow.py",
        "    await asyncio.sleep(0)\n    return await write\n",
        "    return await write\n",
        ("tests/test_guarantees.py",),
    ),
    Mutant(
        "sent-ahead-write-shares-the-state",
        "core/run/loop.py",
        "version = await self.writer.write(prepared, expected_version=run.version,",
        "version = await self.writer.write(self.writer.prepare(run.state), expected_version=run.version,",
        ("tests/test_fault_injection.py",),
    ),
    Mutant(
        "failed-write-sent-ahead-ignored",
        "core/run/flow.py",
        "            self.version = await ahead\n",
        "            try:\n                self.version = await ahead\n            except Exception:\n"
        "                pass\n",
        ("tests/test_guarantees.py",),
    ),
    # ---- heartbeat takeover and recovery ----------------------------------------------------------------
    Mutant(
        "reconciler-no-takeover",
        "supervisor/reconciler.py",
        """                await self.reconcile(self._handles())
                await self.expire_due(self._handles())""",
        """                await self.expire_due(self._handles())""",
        ("tests/test_recovery.py",),
    ),
    Mutant(
        "reconciler-counts-dead-owner-alive",
        "supervisor/reconciler.py",
        "            (held if owner in live else orphans).append((run_id, owner))",
        "            held.append((run_id, owner))",
        ("tests/test_reconciler.py", "tests/test_recovery.py"),
    ),
    Mutant(
        "host-adopts-another-hosts-run",
        "actors/host.py",
        "for run_id, owner in held if owner == self.owner\n",
        "for run_id, owner in held\n",
        ("tests/test_recovery.py", "tests/test_reconciler.py"),
    ),
    Mutant(
        "dead-owner-counted-alive",
        "actors/host.py",
        "        return owner not in await self.store.live_owners()",
        "        return False",
        ("tests/test_recovery.py",),
        harmless="a reader following a dead host's run takes it over itself only if it gets there before "
        "the Runtime's reconciler, which takes the run over on its next round; the reader then follows it "
        "(tests/test_reconciler.py and reconciler-* above guard the takeover itself)",
    ),
    Mutant(
        "recovery-reruns-everything",
        "core/run/recovery.py",
        "        elif tool is not None and tool.idempotent:",
        "        elif tool is not None:",
        ("tests/test_recovery.py",),
    ),
    Mutant(
        "recovery-forgets-delegation",
        "core/run/recovery.py",
        """        elif call.tool_name in delegations:
            reattach.add(call.tool_call_id)
""",
        """        elif call.tool_name in delegations:
""",
        ("tests/test_recovery.py",),
    ),
    Mutant(
        "recovery-ignores-gating",
        "core/run/recovery.py",
        "        elif call.requires_approval and tool is not None:",
        "        elif False:",
        ("tests/test_recovery.py",),
    ),
    Mutant(
        "recovery-takes-live-owners-run",
        "core/run/engine.py",
        'stored.state.status != "running" or stored.state.owner != expected_owner:',
        'stored.state.status != "running":',
        ("tests/test_guarantees.py",),
    ),
    Mutant(
        "late-result-not-recorded",
        "core/run/in_doubt.py",
        "        entries = await self._record(run.state, ran, patience=_RECORD_FOR_S if lost else 0.0)\n",
        "        entries = None\n",
        ("tests/test_late_results.py",),
    ),
    Mutant(
        "recovery-ignores-late-result",
        "core/run/recovery.py",
        "        late = late_results.completed(audit, call)\n",
        "        late = None\n",
        ("tests/test_late_results.py",),
    ),
    Mutant(
        "late-outcome-written-into-the-live-call",
        "core/run/late_results.py",
        "        ran = ToolCallState.model_validate_json(call.model_dump_json())\n",
        "        ran = call\n",
        ("tests/test_late_results.py",),
    ),
    Mutant(
        "decision-reruns-a-late-completed-call",
        "core/run/claim.py",
        "        if applied.target.pause.interrupted:\n",
        "        if False:\n",
        ("tests/test_late_results.py",),
    ),
    # ---- fingerprint ------------------------------------------------------------------------------------
    Mutant(
        "http-approve-ignores-fingerprint",
        "api/runs.py",
        """        "edited_args": body.edited_args,
        "fingerprint": body.fingerprint,""",
        """        "edited_args": body.edited_args,""",
        ("tests/test_guarantees_http.py",),
    ),
    Mutant(
        "http-decline-ignores-fingerprint",
        "api/runs.py",
        """        "reason": body.reason,
        "fingerprint": body.fingerprint,""",
        """        "reason": body.reason,""",
        ("tests/test_guarantees_http.py",),
    ),
    Mutant(
        "client-drops-fingerprint",
        "api/client.py",
        "body = _body(runId=run_id, toolCallId=decision.tool_call_id, fingerprint=decision.fingerprint)",
        "body = _body(runId=run_id, toolCallId=decision.tool_call_id)",
        ("tests/test_guarantees_http.py",),
    ),
    Mutant(
        "inbox-drops-fingerprint",
        "api/static/inbox.js",
        "toolCallId: call.toolCallId, fingerprint: call.fingerprint };",
        "toolCallId: call.toolCallId };",
        ("tests/test_inbox_browser.py",),
    ),
    Mutant(
        "cli-drops-fingerprint",
        "troupe/ops/operator.py",
        '        "fingerprint": args.fingerprint,\n        **who,',
        '        "fingerprint": None,\n        **who,',
        ("tests/test_guarantees_http.py",),
    ),
    Mutant(
        "fingerprint-not-checked",
        "core/deciding/decisions.py",
        "    if fingerprint is None:\n        pause = call.latest_pause",
        "    if True:\n        pause = call.latest_pause",
        APPROVAL,
    ),
    # ---- claiming a decision ----------------------------------------------------------------------------
    Mutant(
        "sqlite-cas-weakened",
        "storage/sqlite.py",
        "version=?, body=?, expires_at=?, top=? WHERE run_id=? AND version=?",
        "version=?, body=?, expires_at=?, top=? WHERE run_id=? AND version>=?",
        ("tests/test_guarantees.py",),
    ),
    Mutant(
        "redis-cas-weakened",
        "storage/redis_scripts.py",
        "if version ~= expected then",
        "if version < expected then",
        ("tests/test_store_conformance.py",),
    ),
    Mutant(
        "memory-cas-weakened",
        "storage/memory.py",
        "        if expected_version != (0 if entry is None else entry[1]):",
        "        if expected_version > (0 if entry is None else entry[1]):",  # a stale version passes
        ("tests/test_store_conformance.py",),
    ),
    Mutant(
        "claim-not-audited",
        "core/run/claim.py",
        "audit = () if applied.delegated else (entry,)",
        "audit = ()",
        ("tests/test_snapshots.py", "tests/test_guarantees.py"),
    ),
    Mutant(
        "checkpoint-drops-pending-audit",
        "core/run/loop.py",
        "prepared, expected_version=run.version, audit=audit, thread=thread",
        "prepared, expected_version=run.version, audit=(), thread=thread",
        ("tests/test_guarantees.py",),
    ),
    Mutant(
        "routed-decision-plan-not-audited",
        "core/run/claim.py",
        "child_streams={call.tool_call_id: stream}, audit=(applied.entry,)",
        "child_streams={call.tool_call_id: stream}",
        ("tests/test_guarantees.py",),
    ),
    Mutant(
        "lifted-pause-drops-subagent-deadline",
        "core/run/pauses.py",
        "expires_at=self.deadline(state, inner.expires_at),",
        "expires_at=self.deadline(state, None),",
        ("tests/test_run_flow.py",),
    ),
    Mutant(
        "already-decided-check-removed",
        "core/deciding/decisions.py",
        """        if call.decision is not None:
            decision = call.decision
            raise already_decided(
                state.run_id, call.tool_call_id, decision.kind, decision.decided_by, decision.reason
            )
""",
        "",
        APPROVAL,
    ),
    Mutant(
        "paused-status-check-removed",
        "core/deciding/decisions.py",
        "    if call.status not in (CallStatus.AWAITING_APPROVAL, CallStatus.SUSPENDED):",
        "    if False:",
        APPROVAL,
    ),
    Mutant(
        "stale-claim-not-retried",
        "core/run/claim.py",
        """            return await self._write_applied(stored, ruling, request, thread)
        except StaleSnapshotError:
            return None""",
        """            return await self._write_applied(stored, ruling, request, thread)
        except StaleSnapshotError:
            raise""",
        ("tests/test_guarantees.py",),
    ),
    Mutant(
        "decline-runs-tool",
        "core/deciding/decisions.py",
        """                call.status = CallStatus.DONE
                call.declined = True""",
        """                call.status = CallStatus.RUNNING
                call.declined = True""",
        ("tests/test_approval.py",),
    ),
    Mutant(
        "expiry-ignores-deadline",
        "core/run/engine.py",
        "if pause.expires_at is not None and pause.expires_at <= now",
        "if pause.expires_at is not None",
        ("tests/test_expiry.py",),
    ),
    Mutant(
        "late-decision-accepted",
        "core/deciding/decisions.py",
        "    if expires_at is not None and expires_at <= now:",
        "    if expires_at is not None and False:",
        ("tests/test_expiry.py",),
    ),
    # ---- the tool threads' short hop ----------------------------------------------------------------------
    Mutant(
        "sync-call-run-after-it-was-given-up-in-the-queue",
        "core/vocabulary/tool_threads.py",
        "                taken = call.stage == _QUEUED\n",
        "                taken = True\n",
        ("tests/test_tool_thread_pool.py",),
    ),
    Mutant(
        "late-outcome-lost-when-it-came-before-the-cancel",
        "core/vocabulary/tool_threads.py",
        "                if call.outcome is not None:  # it ended, and its outcome is here already\n",
        "                if False:\n",
        ("tests/test_tool_thread_pool.py",),
    ),
    Mutant(
        "closed-pools-thread-counted-idle",
        "core/vocabulary/tool_threads.py",
        "                if self._calls is calls:",
        "                if True:",
        ("tests/test_tool_thread_pool.py",),
    ),
    Mutant(
        "tool-threads-abandoned-at-exit",
        "core/vocabulary/tool_threads.py",
        "@atexit.register\n",
        "",
        ("tests/test_tool_thread_pool.py",),
    ),
    # ---- reading a stream in the reader's task ------------------------------------------------------------
    Mutant(
        "stream-batches-forgotten-by-a-cancelled-pull",
        "actors/handle.py",
        "            self._batch, self._given = await self._fetch(batch.op_id), False\n",
        "            self._batch = None\n"
        "            self._batch, self._given = await self._fetch(batch.op_id), False\n",
        ("tests/test_stream_reading.py",),
    ),
    Mutant(
        "stream-that-came-back-whole-pulled-by-a-task",
        "actors/handle.py",
        "        return (_PulledBatches if first.done else _Batches)(first, _Follow(self, actor).next)\n",
        "        return _Batches(first, _Follow(self, actor).next)\n",
        ("tests/test_actor_calls.py",),
    ),
    Mutant(
        "stream-of-this-process-pulled-by-a-task",
        "core/vocabulary/stream.py",
        "        if not isinstance(batches, CallerPulledBatches):\n",
        "        if True:\n",
        ("tests/test_stream_reading.py",),
    ),
]


# Notifications, decision links and the actor channel.
MUTANTS += [
    Mutant(
        "outbox-written-after-the-pause",
        "core/run/writes.py",
        """        version = await self.store.save_run(
            prepared.record, expected_version=expected_version, audit=audit, thread=thread, **extra
        )""",
        """        version = await self.store.save_run(
            prepared.record, expected_version=expected_version, audit=audit, thread=thread
        )
        if outbox:  # a second write: a failure in between loses the notification
            version = await self.store.save_run(prepared.record, expected_version=version, **extra)""",
        ("tests/test_guarantees.py",),
    ),
    Mutant(
        "link-holder-counted-anew",
        "api/decision_links.py",
        "        return LINK_HOLDER",
        "        return Principal(LINK_PRINCIPAL + __import__('uuid').uuid4().hex, 'troupe:link')",
        ("tests/test_decision_links.py",),
    ),
    Mutant(
        "webhook-attempt-unbounded",
        "actors/webhook_sender.py",
        "            async with asyncio.timeout(timeout_s):",
        "            if True:",
        ("tests/test_webhook_sender.py",),
    ),
    Mutant(
        "webhook-answer-body-read",
        "actors/webhook_sender.py",
        "                await response.aclose()  # the status is all that counts: the body is never read\n",
        "                await response.aread()\n",
        ("tests/test_webhook_sender.py",),
    ),
    Mutant(
        "channel-client-ignores-reply-version",
        "actors/channel.py",
        "        if version != PROTOCOL_VERSION:\n            writer.close()",
        "        if False:\n            writer.close()",
        ("tests/test_actor_channel.py",),
    ),
]


# Who may decide, and what a decision may carry (docs/how-to/approver-policies.md, docs/getting-started).
POLICIES = ("tests/test_approver_policies.py",)
MUTANTS += [
    Mutant(
        "tenancy-not-checked",
        "core/vocabulary/identity.py",
        "        return self.admin or (resource_id is not None and resource_id in self.resources)",
        "        return True",
        ("tests/test_http_auth.py",),
    ),
    Mutant(
        "policy-roles-not-checked",
        "core/deciding/approvers.py",
        "    if policy.roles is not None and not policy.roles.intersection(who.roles):",
        "    if False:",
        POLICIES,
    ),
    Mutant(
        "separation-of-duties-not-checked",
        "core/deciding/approvers.py",
        "    if policy.separation_of_duties and state.starter_id == who.id:",
        "    if False:",
        POLICIES,
    ),
    Mutant(
        "quorum-not-counted",
        "core/deciding/decisions.py",
        "        if needs_more(policy, target.pause, decision):",
        "        if False:",
        POLICIES,
    ),
    Mutant(
        "link-signature-not-checked",
        "core/notifying/links.py",
        "            genuine = bool(link_id) and hmac.compare_digest(_unb64(mac), "
        "self._mac(_CONTEXT, link_id))",
        "            genuine = bool(link_id)",
        ("tests/test_decision_links.py",),
    ),
    Mutant(
        "link-expiry-not-checked",
        "core/notifying/links.py",
        "        if (time.time() if now is None else now) >= record.expires_at:",
        "        if False:",
        ("tests/test_decision_links.py",),
    ),
    Mutant(
        "edited-args-without-opt-in",
        "core/deciding/decisions.py",
        "    if not tool.allow_edited_args:",
        "    if False:",
        ("tests/test_approval.py",),
    ),
    Mutant(
        "resume-data-not-validated",
        "core/deciding/decisions.py",
        '        return schema.model_validate_json(encoded, strict=strict).model_dump(mode="json")',
        "        return data",
        ("tests/test_suspend.py",),
    ),
    Mutant(
        "chat-answers-an-approval",
        "core/run/auto_resume.py",
        'if pause.kind == "suspend" and pause.resume_schema is not None:',
        "if pause.resume_schema is not None:",
        ("tests/test_threads.py", "tests/test_mastra_scenarios_g_to_k.py"),
    ),
    Mutant(
        "model-args-depth-unbounded",
        "core/vocabulary/storable.py",
        "        if depth > MAX_DEPTH:",
        "        if False:",
        ("tests/test_model_output.py",),
    ),
    Mutant(
        "body-limit-trusts-nothing",
        "api/guards.py",
        "(not declared.strip().isdigit() or int(declared) > self.max_bytes)",
        "False",
        ("tests/test_operator_safety.py",),
    ),
]


# Nothing reachable from another host without a credential (docs/concepts/security.md, "A server safe by
# default").
MUTANTS += [
    Mutant(
        "embedded-ray-on-rays-fixed-agent-port",
        "actors/remote.py",
        ', "dashboard_agent_listen_port": 0}',
        "}",
        ("tests/test_ray_auth.py",),
    ),
    Mutant(
        "serve-replica-grpc-on-every-interface",
        "troupe/front_door.py",
        "        _replica_grpc_on_node_address()\n",
        "",
        ("tests/test_serve_front_door.py",),
    ),
]


# Identity (docs: concepts/security.md, how-to/identity.md): people are compared by subject
# id (issuer + subject) on every surface; a governed call always pauses and needs someone who says who
# they are; every approval of a quorum is for the same args; tokens are checked before anything changes.
IDENTITY = ("tests/test_identity_tokens.py",)
MUTANTS += [
    Mutant(
        "separation-of-duties-by-name",
        "core/deciding/approvers.py",
        "    if policy.separation_of_duties and state.starter_id == who.id:",
        "    if policy.separation_of_duties and state.started_by == who.display:",
        POLICIES,
    ),
    Mutant(
        "quorum-counts-names",
        "core/deciding/approvers.py",
        "any(a.id == who.id for a in pause.approvals)",
        "any(a.display == who.display for a in pause.approvals)",
        POLICIES,
    ),
    Mutant(
        "anonymous-decides-a-governed-call",
        "core/deciding/approvers.py",
        "    if who is None or who.anonymous:",
        "    if who is None:",
        ("tests/test_decision_links.py",),
    ),
    Mutant(
        "quorum-ignores-edits",
        "core/deciding/approvers.py",
        "    return len(agreeing(pause, approved_args(pause, decision.edited_args))) + 1 < policy.quorum",
        "    return len(pause.approvals) + 1 < policy.quorum",
        POLICIES,
    ),
    Mutant(
        "governed-call-not-gated",
        "core/deciding/policy.py",
        "    if under_policy or run_policy is True or tool.require_approval is True:",
        "    if run_policy is True or tool.require_approval is True:",
        POLICIES,
    ),
    Mutant(
        "remote-options-switch-gating-off",
        "core/run/engine.py",
        '    if request.remote and given.get("require_tool_approval") is not True:',
        "    if False:",
        POLICIES,
    ),
    Mutant(
        "python-decides-by-name",
        "supervisor/agent.py",
        "        return (Principal.named(who, roles) if who is not None else None), surface",
        "        return (Principal.named(getattr(who, 'display', who), roles) "
        "if who is not None else None), surface",
        POLICIES,
    ),
    Mutant(
        "http-decides-by-name",
        "api/service.py",
        '    return {"decided_by": principal, "surface": surface(request)}',
        '    return {"decided_by": principal.display, "surface": surface(request)}',
        IDENTITY,
    ),
    Mutant(
        "link-decides-by-name",
        "api/decision_links.py",
        '        "decided_by": decider,',
        '        "decided_by": decider.display,',
        ("tests/test_decision_links.py",),
    ),
    Mutant(
        "cli-drops-the-issuer",
        "troupe/ops/operator.py",
        "Principal(who, args.issuer or LOCAL_ISSUER, who,",
        "Principal(who, LOCAL_ISSUER, who,",
        IDENTITY,
    ),
    Mutant(
        "inbox-surface-not-recorded",
        "api/service.py",
        '    return str(getattr(request.scope.get("route"), "surface", "http"))',
        '    return "http"',
        ("tests/test_http_inbox.py", "tests/test_inbox_browser.py"),
    ),
    Mutant(
        "host-identity-ignored",
        "api/identity.py",
        "        request.state.troupe = Binding(service, found, again)",
        "        request.state.troupe = Binding(service, None, again)",
        ("tests/test_identity_host_app.py",),
    ),
    Mutant(
        "identity-callable-not-a-dependency",
        "api/identity.py",
        "        params = [params[0].replace(annotation=Request)]",
        "        pass",
        ("tests/test_identity_host_app.py",),
    ),
    Mutant(
        "jwks-file-not-read-again",
        "api/tokens.py",
        "            if self._file is not None and self._file[0] == stamp:",
        "            if self._file is not None:",
        IDENTITY,
    ),
    Mutant(
        "token-issuer-not-checked",
        "api/tokens.py",
        "                issuer=s.issuer,\n",
        "",
        IDENTITY,
    ),
    Mutant(
        "token-expiry-not-checked",
        "api/tokens.py",
        '                options={"require": ["exp", "iss", "aud"]},',
        '                options={"require": ["iss", "aud"], "verify_exp": False, "verify_nbf": False},',
        IDENTITY,
    ),
    Mutant(
        "issued-link-decides-as-anyone",
        "api/decision_links.py",
        '(the core refuses the rest)."""\n    named = approver_of(claim)',
        '(the core refuses the rest)."""\n    named = None',
        ("tests/test_decision_links.py",),
    ),
]


# Commands the docs promise, each tested as written (tests/test_readme_commands.py).
MUTANTS += [
    Mutant(
        "actor-channel-setting-ignored",
        "actors/remote.py",
        '_CHANNELS = os.environ.get("TROUPE_ACTOR_CHANNEL", "1") != "0"',
        "_CHANNELS = True",
        ("tests/test_readme_commands.py",),
    ),
    Mutant(
        "otlp-exporter-not-used",
        "core/tracing.py",
        "            exporter = OTLPSpanExporter()",
        "            exporter = ConsoleSpanExporter()",
        ("tests/test_tracing.py",),
    ),
]


# RedisStore on Redis Cluster (tests/test_redis_cluster.py; the conformance suite runs on the cluster too).
REDIS_CLUSTER = ("tests/test_redis_cluster.py", "tests/test_store_conformance.py")
MUTANTS += [
    Mutant(
        "redis-shards-untagged",
        "storage/redis_keys.py",
        'self.shards = [Keys(f"{prefix}{{{prefix}{n}}}:", n) for n in range(shards)]',
        'self.shards = [Keys(f"{prefix}{prefix}{n}:", n) for n in range(shards)]',
        REDIS_CLUSTER,
    ),
    Mutant(
        "redis-listing-reads-one-shard",
        "storage/redis_listing.py",
        "self._page_of(link, shard, query, one) for shard in self.layout.shards)",
        "self._page_of(link, shard, query, one) for shard in self.layout.shards[:1])",  # the first only
        REDIS_CLUSTER,
    ),
    Mutant(
        "redis-thread-run-not-found-by-id",
        "storage/redis.py",
        "            taken = (\n                expected_version == 0\n",
        # The id's home is never claimed.
        "            taken = False and (\n                expected_version == 0\n",
        REDIS_CLUSTER,
    ),
]

# ---- MCP: tools from outside, Troupe served over MCP -------------------------------------------------------
MCP_TOOLS = ("tests/test_mcp_tools.py",)
MCP_ELICIT = ("tests/test_mcp_elicitation.py",)
MCP_SERVER = ("tests/test_mcp_server.py",)
MUTANTS += [
    Mutant(
        "mcp-annotations-ignored",
        "actors/mcp/tools.py",
        '    return annotations.get("readOnlyHint") is not True\n',
        "    return False\n",
        MCP_TOOLS,
    ),
    Mutant(
        "mcp-never-rule-ignored",
        "actors/mcp/tools.py",
        '        if name in rule.get("never", ()):\n            return False\n',
        "",
        MCP_TOOLS,
    ),
    Mutant(
        "mcp-arguments-unchecked",
        "core/vocabulary/json_schemas.py",
        "        errors = instance_errors(cls.SCHEMA, data)\n",
        "        errors: list[str] = []\n",
        MCP_TOOLS,
    ),
    Mutant(
        "mcp-no-leash",
        "actors/mcp/connection.py",
        "                    command=sys.executable,\n"
        '                    args=["-I", "-S", str(LEASH), server.command, *server.args],\n',
        "                    command=server.command,\n                    args=list(server.args),\n",
        ("tests/test_mcp_ray.py::test_a_server_that_outlives_its_stdin_ends_with_a_crashed_local_driver",),
    ),
    Mutant(
        "mcp-elicitation-answer-unchecked",
        "core/deciding/decisions.py",
        "    errors = instance_errors(target.pause.resume_schema, data)\n",
        "    errors: list[str] = []\n",
        MCP_ELICIT,
    ),
    Mutant(
        "mcp-lost-elicitation-reruns-the-call",
        "actors/mcp/tools.py",
        "            if call is None:\n                raise ToolInterrupted(INTERRUPTED_ELICITATION)\n",
        "            if call is None:\n"
        "                call = self.connection.start_call(self.name, {}, key)\n",
        MCP_ELICIT,
    ),
    Mutant(
        "mcp-expiry-not-a-cancel",
        "actors/mcp/calls.py",
        '    return {"action": "cancel" if expired else "decline"}\n',
        '    return {"action": "decline"}\n',
        MCP_ELICIT,
    ),
    Mutant(
        "mcp-decline-not-told-to-the-server",
        "actors/mcp/tools.py",
        "        resume_on_decline=True,\n",
        "        resume_on_decline=False,\n",
        MCP_ELICIT,
    ),
    Mutant(
        "mcp-result-unbounded",
        "actors/mcp/results.py",
        "    problem = args_problem(output)\n",
        "    problem = None\n",
        ("tests/test_mcp_hostile.py",),
    ),
    Mutant(
        "mcp-tool-schema-unchecked",
        "actors/mcp/tools.py",
        '        problem = f"tool name {misnamed}" if misnamed is not None else schema_problem(schema)\n',
        '        problem = f"tool name {misnamed}" if misnamed is not None else None\n',
        ("tests/test_mcp_hostile.py",),
    ),
    Mutant(
        "mcp-tool-name-clash-unchecked",
        "core/run/loop.py",
        "            if owner is not None:\n                raise ToolNameConflictError(",
        "            if False:\n                raise ToolNameConflictError(",
        ("tests/test_mcp_hostile.py",),
    ),
    Mutant(
        "mcp-served-decision-without-principal",
        "api/mcp_pauses.py",
        '            "decided_by": caller,\n',
        "",
        MCP_SERVER,
    ),
    Mutant(
        "mcp-served-tenancy-unchecked",
        "api/mcp_server.py",
        "    options: dict[str, Any] = "
        '{"resource_id": own_resource(caller, _text(arguments, "resourceId"))}\n',
        '    options: dict[str, Any] = {"resource_id": _text(arguments, "resourceId")}\n',
        MCP_SERVER,
    ),
    Mutant(
        "mcp-served-session-not-bound-to-key",
        "api/mcp_http.py",
        '        scope["user"] = _session_owner(principal.id, authorization)\n',
        "",
        MCP_SERVER,
    ),
    Mutant(
        "mcp-served-origin-unchecked",
        "api/mcp_http.py",
        '        if not self._origin_allowed(_header(scope, b"origin")):\n',
        "        if False:\n",
        MCP_SERVER,
    ),
    Mutant(
        "mcp-served-wrong-key-let-in",
        "api/mcp_http.py",
        "        except AuthenticationError as exc:\n"
        "            await _refuse(send, exc)\n            return\n",
        "        except AuthenticationError:\n            principal = ANONYMOUS\n",
        MCP_SERVER,
    ),
]

# ---- The benchmark's fsync counters (bench/fsync_count.py: W3-fsync's fsyncs per run) --------------------
FSYNC_COUNT = ("tests/test_bench_fsync_count.py",)
MUTANTS += [
    Mutant(
        "fsync-count-main-thread-only",
        "bench/fsync_count.py",
        'trace = ["-f", "-c", ',
        # Without -f, strace attaches to the thread whose id is the pid and misses a writer thread's calls.
        'trace = ["-c", ',
        FSYNC_COUNT,
    ),
    Mutant(
        "fsync-count-perf-one-thread",
        "bench/fsync_count.py",
        '                "-p",\n                str(pid),\n',
        # perf -t counts the one thread whose id is the pid.
        '                "-t",\n                str(pid),\n',
        FSYNC_COUNT,
    ),
    Mutant(
        "fsync-count-asleep-is-an-error",
        "bench/fsync_count.py",
        "            elif name in SYSCALLS and cells[0] == NOT_COUNTED:\n                counts[name] = 0\n",
        "",
        FSYNC_COUNT,
    ),
    Mutant(
        "fsync-count-reads-another-column",
        "bench/fsync_count.py",
        "counts[cells[-1]] = int(cells[3])",
        "counts[cells[-1]] = int(cells[2])",
        FSYNC_COUNT,
    ),
]

# ---- AG-UI (troupe.api.agui*: interrupts, resume entries as decisions) -----------------------------------
AGUI = "tests/test_agui.py::"
AGUI_APPROVE = (AGUI + "test_an_approval_is_an_interrupt_and_resume_runs_the_tool_once[local]",)
AGUI_REFUSALS = (AGUI + "test_entries_that_cannot_be_taken_decide_nothing[local]",)
MUTANTS += [
    Mutant(
        "agui-replayed-resume-not-known-as-decided",
        "api/agui_interrupts.py",
        "    if wanted in decided:\n",
        "    if False:\n",
        AGUI_APPROVE,
    ),
    Mutant(
        "agui-invalid-entry-skipped-the-others-decided",
        "api/agui_interrupts.py",
        "        checked.append(_answer(entry, pause))\n",
        "        try:\n            checked.append(_answer(entry, pause))\n"
        "        except ResumeInvalidError:\n            continue\n",
        AGUI_REFUSALS,
    ),
    Mutant(
        "agui-new-run-over-an-open-interrupt",
        "api/agui.py",
        "            if pauses and messages:\n",
        "            if False:\n",
        AGUI_REFUSALS,
    ),
    Mutant(
        "agui-resolved-without-payload-not-missing",
        "api/agui_interrupts.py",
        "    if entry.payload is None:\n",
        "    if False:\n",
        AGUI_REFUSALS,
    ),
    Mutant(
        "agui-listing-across-tenants",
        "api/agui.py",
        "found = await self.agent.list_suspended_runs(thread_id=self.thread, resource_id=self.resource)",
        "found = await self.agent.list_suspended_runs(thread_id=self.thread, resource_id=None)",
        AGUI_REFUSALS,
    ),
    Mutant(
        "agui-cancelled-approves",
        "api/agui_interrupts.py",
        '    if entry.status == "cancelled":\n        return Answer(pause, "decline")\n',
        '    if entry.status == "cancelled":\n        return Answer(pause, "approve")\n',
        (AGUI + "test_declining_gives_the_model_the_reason_and_cancelled_declines[local]",),
    ),
    Mutant(
        "agui-edits-unchecked-before-deciding",
        "api/agui_interrupts.py",
        "        merged_args(pause.tool, target.call, edited)\n",
        "",
        (AGUI + "test_approving_with_edited_args_where_the_tool_allows_them[local]",),
    ),
    Mutant(
        "agui-decided-not-as-the-caller",
        "api/agui.py",
        '            "decided_by": self.caller,\n',
        "",
        AGUI_APPROVE,
    ),
    Mutant(
        "agui-surface-not-recorded",
        "api/agui.py",
        'SURFACE = "ag-ui"',
        'SURFACE = "http"',
        AGUI_APPROVE,
    ),
]


# ---- A2A both ways (issue 43): Troupe's agents over A2A, remote A2A agents as subagents ------------------
A2A_SERVER = "tests/test_a2a_server.py"
A2A_REMOTE = "tests/test_a2a_remote.py"
MUTANTS += [
    Mutant(
        "start-not-named-yet-reported-lost-at-once",
        "actors/a2a/proxy_run.py",
        "            stored = await self._named_meanwhile()\n",
        "            stored = None\n",
        (f"{A2A_REMOTE}::test_a_start_whose_task_is_not_named_yet_is_waited_for_not_reported_lost",),
    ),
    Mutant(
        "second-follower-of-a-remote-task-fails-its-run",
        "actors/a2a/proxy_run.py",
        '            if stored is None or stored.state.status == "running":\n                raise\n',
        "            raise\n",
        (f"{A2A_REMOTE}::test_two_processes_following_one_task_both_tell_the_end_the_first_recorded",),
    ),
    Mutant(
        "remote-failure-on-an-answer-read-as-not-taken",
        "actors/a2a/proxy_run.py",
        "        except RemoteFailed as exc:\n"
        "            return await self._answered_with(exc, before, pause)\n",
        "        except RemoteFailed as exc:\n            await self._put_back(before)\n"
        '            raise DecisionNotDeliveredError(f"{exc.message}; the answer was not taken") from None\n',
        (
            f"{A2A_REMOTE}::test_an_answer_the_remote_agent_failed_on_is_followed_to_its_task_not_reported_not_taken",
            f"{A2A_REMOTE}::test_an_answer_the_remote_agent_may_have_acted_on_waits_again_marked_interrupted",
        ),
    ),
    Mutant(
        "refused-answer-put-back-though-the-task-moved-on",
        "actors/a2a/proxy_run.py",
        "        if not asks:\n            return self._unsure(error)\n",
        "",
        (f"{A2A_REMOTE}::test_an_answer_the_remote_agent_failed_on_is_followed_to_its_task_not_reported_not_taken",),
    ),
    Mutant(
        "remote-call-put-back-unmarked-after-a-failure",
        "actors/a2a/proxy_run.py",
        "        await self._put_back(before, interrupted=pause)\n        raise DecisionInterruptedError(\n",
        "        await self._put_back(before)\n        raise DecisionInterruptedError(\n",
        (f"{A2A_REMOTE}::test_an_answer_the_remote_agent_may_have_acted_on_waits_again_marked_interrupted",),
    ),
    Mutant(
        "interrupted-two-hops-down-read-as-a-refusal",
        "actors/a2a/proxy_run.py",
        "        if code == DecisionInterruptedError.code:",
        "        if code == DecisionInterruptedError.code and False:",
        (
            f"{A2A_REMOTE}::"
            "test_an_answer_that_may_have_acted_two_hops_down_waits_marked_interrupted_at_the_top",
        ),
    ),
    Mutant(
        "lost-answer-whose-task-still-asks-fails-the-delegation",
        "actors/a2a/proxy_run.py",
        "            async for chunk in self._settle(outcome, interrupted=True):\n",
        "            async for chunk in self._fail(RemoteAgentError(lost.message)):\n",
        (
            f"{A2A_REMOTE}::"
            "test_an_answer_whose_reply_is_lost_and_whose_task_still_asks_is_asked_again_marked_interrupted",
        ),
    ),
    Mutant(
        "lost-answer-whose-task-still-asks-asked-again-unmarked",
        "actors/a2a/proxy_run.py",
        "self._settle(outcome, interrupted=True)",
        "self._settle(outcome, interrupted=False)",
        (
            f"{A2A_REMOTE}::"
            "test_an_answer_whose_reply_is_lost_and_whose_task_still_asks_is_asked_again_marked_interrupted",
        ),
    ),
    Mutant(
        "broken-off-stream-of-a-named-task-fails-the-delegation",
        "actors/a2a/proxy_run.py",
        "                if task.task_id is None:\n                    raise\n",
        "                raise\n",
        (f"{A2A_REMOTE}::test_a_stream_that_breaks_off_once_the_task_is_named_is_followed_by_asking",),
    ),
    Mutant(
        "interrupted-below-put-back-plain-above",
        "core/run/claim.py",
        "interrupted=isinstance(exc, DecisionInterruptedError)",
        "interrupted=False",
        (f"{A2A_REMOTE}::test_an_answer_the_remote_agent_may_have_acted_on_waits_again_marked_interrupted",),
    ),
    Mutant(
        "remote-call-in-doubt-shown-as-a-plain-approval",
        "actors/a2a/questions.py",
        "        interrupted=bool(view.interrupted),\n        in_doubt=doubt,\n",
        "        interrupted=bool(view.interrupted),\n",
        (f"{A2A_REMOTE}::test_a_remote_call_in_doubt_is_shown_so_and_not_decided_before_its_deadline",),
    ),
    Mutant(
        "call-in-doubt-listed-over-a2a-without-its-deadline",
        "actors/a2a/pending.py",
        "        in_doubt=InDoubtView.model_validate(call.in_doubt)"
        " if call.in_doubt is not None else None,\n",
        "",
        (f"{A2A_REMOTE}::test_a_call_in_doubt_is_listed_with_its_marks_and_a_plain_one_without_them",),
    ),
    Mutant(
        "a2a-answer-claim-overwrites",
        "actors/a2a/proxy_run.py",
        "        except StaleSnapshotError:\n            now = await self.store.load_run(state.run_id)\n",
        # A claim that lost the race writes over the winner's: two deciders at once both send an answer.
        "        except StaleSnapshotError:\n"
        "            stored = await self.store.load_run(state.run_id)\n"
        "            self.version = await self.store.save_run(state, expected_version=stored.version)\n"
        "            return await self._sent(message, before)\n"
        "            now = await self.store.load_run(state.run_id)\n",
        (f"{A2A_REMOTE}::test_two_processes_deciding_at_once_send_one_answer",),
    ),
    Mutant(
        "a2a-lost-answer-sent-again",
        "actors/a2a/proxy_run.py",
        "        except RemoteLost as exc:\n            return self._unsure(exc)\n",
        "        except RemoteLost:\n            return self._follow(self.remote.send(message))\n",
        (f"{A2A_REMOTE}::test_an_answer_whose_reply_is_lost_is_looked_up_never_sent_again[local]",),
    ),
    Mutant(
        "a2a-undelivered-answer-not-put-back",
        "actors/a2a/proxy_run.py",
        "            await self._put_back(before)\n"
        '            raise DecisionNotDeliveredError(f"{exc.message}; the answer was not sent")',
        '            raise DecisionNotDeliveredError(f"{exc.message}; the answer was not sent")',
        (f"{A2A_REMOTE}::test_an_answer_that_cannot_be_delivered_leaves_the_call_paused[local]",),
    ),
    Mutant(
        "a2a-refused-answer-is-an-rpc-error",
        "api/a2a_server.py",
        "        except TroupeError as exc:  # nothing decided: every call still waits\n"
        "            yield paused_task(state, note=exc, inbox=call.inbox)\n",
        "        except TroupeError:\n            raise\n",
        (f"{A2A_SERVER}::test_a_refused_answer_leaves_the_task_input_required_and_loses_nothing[local]",),
    ),
    Mutant(
        "a2a-another-tenants-task-visible",
        "api/a2a_server.py",
        'if info is None or not call.caller.may(info["resource_id"]):',
        "if info is None:",
        (f"{A2A_SERVER}::test_another_tenants_task_can_be_neither_seen_nor_answered[local]",),
    ),
    Mutant(
        "a2a-decided-as-nobody",
        "api/a2a_server.py",
        '        "decided_by": call.caller,\n',
        "",
        (f"{A2A_SERVER}::test_declining_with_a_reason_finishes_the_task_and_never_runs_the_tool[local]",),
    ),
    Mutant(
        "a2a-card-without-a-key",
        "api/a2a_http.py",
        "request: Request, service: ServiceDep, caller: CallerDep) -> Response:\n"
        '        """The agent\'s A2A card."""',
        'request: Request, service: ServiceDep) -> Response:\n        """The agent\'s A2A card."""',
        (f"{A2A_SERVER}::test_a_wrong_key_is_refused[local]",),
    ),
    Mutant(
        "a2a-response-unbounded",
        "actors/a2a/connection.py",
        'raise _TooLarge(f"the response is larger than {self.limit} bytes")',
        "pass",
        (f"{A2A_REMOTE}::test_a_remote_agent_that_makes_no_sense_is_a_tool_error[local-response-too-large]",),
    ),
    Mutant(
        "a2a-answer-unbounded",
        "actors/a2a/remote_task.py",
        "        problem = value_problem(text, MAX_RESULT_CHARS)\n        if problem is not None:\n"
        '            raise self.error(f"answered with what cannot be kept: {problem}")\n',
        "",
        (f"{A2A_REMOTE}::test_a_remote_agent_that_makes_no_sense_is_a_tool_error[local-answer-too-large]",),
    ),
]


# ---- A newcomer's first steps: serve's port, its stop, the client's error, the clone folder (issue 45) ---
LIFECYCLE = "tests/test_serve_lifecycle.py"
MUTANTS += [
    Mutant(
        "serve-seeds-before-taking-its-port",
        "troupe/cli.py",
        "    _check_serve_args(parser, args)\n    try:\n",
        "    _check_serve_args(parser, args)\n"
        "    if args.demo:\n"
        '        _demo_runtime(args.store, "local", None)\n'
        "    try:\n",
        (
            f"{LIFECYCLE}::test_a_port_in_use_fails_at_once_naming_it_and_leaves_the_demo_store_as_it_was[uvicorn]",
        ),
    ),
    Mutant(
        "client-connect-error-raw",
        "api/client.py",
        "        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:",
        "        except httpx.ConnectTimeout as exc:",
        (
            f"{LIFECYCLE}::test_the_async_client_names_the_url_of_a_server_that_is_not_there",
            f"{LIFECYCLE}::test_the_blocking_client_names_the_url_of_a_server_that_is_not_there",
        ),
    ),
    Mutant(
        "client-error-shows-the-password",
        "api/client.py",
        '        url = url.copy_with(username=url.username, password="***")',
        "        pass",
        (f"{LIFECYCLE}::test_the_async_client_names_the_url_of_a_server_that_is_not_there",),
    ),
    Mutant(
        "ray-processes-in-the-callers-group",
        "actors/remote.py",
        '            super().__init__(*args, **{**kwargs, "process_group": 0})',
        "            super().__init__(*args, **kwargs)",
        (f"{LIFECYCLE}::test_a_sigterm_to_the_process_group_ends_serve_on_its_own_ray_in_seconds",),
    ),
    Mutant(
        "editable-finder-asked-last",
        "scripts/backend/troupe_backend.py",
        "    before_namespaces(Path(wheel_directory) / name)\n",
        "",
        ("tests/test_clone_folder.py",),
    ),
    Mutant(
        "editable-install-shadows-real-packages",
        "scripts/backend/troupe_backend.py",
        "        if found is not None and found.origin is not None:\n            return found\n",
        "",
        ("tests/test_clone_folder.py",),
    ),
]


# ---- Issue 40: no way around a decision (links, CSRF, MCP sessions, delivery lanes) ----------------------
LINKS = ("tests/test_decision_links.py",)
MUTANTS += [
    Mutant(
        "subagent-run-decided-around-the-top",
        "core/deciding/decisions.py",
        "    if state.parent is not None and not request.routed:\n        raise _decided_below(state)\n",
        "",
        ("tests/test_approver_policies.py",),
    ),
    Mutant(
        "link-key-may-be-a-webhook-secret",
        "core/notifying/outbox.py",
        "    if shared:\n        raise ValueError(",
        "    if False:\n        raise ValueError(",
        LINKS,
    ),
    Mutant(
        "link-used-twice-by-one-person",
        "api/decision_links.py",
        "    if await store.use_link(claim.id, decider.id, time.time()) is None:",
        "    if False:",
        LINKS,
    ),
    Mutant(
        "link-token-names-no-record",
        "core/notifying/links.py",
        "        record = await store.load_link(self.link_id(token))",
        "        record = await store.load_link(token.partition('.')[0])",
        LINKS,
    ),
    Mutant(
        "mcp-paused-result-hands-out-links",
        "api/mcp_pauses.py",
        '            "body": body,\n',
        '            "body": body,\n            "links": f"{base}/decide/anything",\n',
        ("tests/test_mcp_server.py",),
    ),
    Mutant(
        "link-post-cross-site-accepted",
        "api/decision_links.py",
        "        refuse_cross_site(request, trusted=[_signer(service).public_url])\n",
        "",
        ("tests/test_identity_host_app.py", "tests/test_decision_link_browser.py"),
    ),
    Mutant(
        "mcp-sessions-not-limited-per-principal",
        "api/mcp_http.py",
        "            if self.sessions_of(principal.id) >= self.limits.sessions_per_principal:",
        "            if False:",
        ("tests/test_mcp_server.py",),
    ),
    Mutant(
        "mcp-sessions-opened-at-once-not-counted",
        "api/mcp_http.py",
        "        await lock.acquire()\n",
        "",
        ("tests/test_mcp_server.py",),
    ),
    Mutant(
        "mcp-sessions-idle-for-half-an-hour",
        "api/mcp_http.py",
        "            session_idle_timeout=self.limits.idle_s,\n",
        "",
        ("tests/test_mcp_server.py",),
    ),
    Mutant(
        "delivery-lanes-share-every-target",
        "core/notifying/dispatcher.py",
        "                await self.pump(target)\n",
        "                await self.pump()\n",
        ("tests/test_notifications.py",),
    ),
    Mutant(
        "lane-claim-takes-any-target",
        "storage/memory.py",
        "            if target is None or entry.target == target",
        "            if True",
        ("tests/test_store_conformance.py",),
    ),
    Mutant(
        "link-post-origin-not-checked",
        "api/cross_site.py",
        "    if not same_host and origin.lower() not in {origin_of(t) for t in trusted}:",
        "    if False:",
        ("tests/test_identity_host_app.py",),
    ),
]

# Issue 40's LOWs, and the guarantees no test guarded before it (each test fails when its line breaks).
TOKENS = ("tests/test_identity_tokens.py",)
MUTANTS += [
    Mutant(
        "jwks-refetch-cooldown-zero",
        "api/jwks.py",
        "            self._tried_at is not None and now - self._tried_at < self.cooldown_s\n",
        "            False\n",
        TOKENS,
    ),
    Mutant(
        "token-leeway-ignored",
        "api/tokens.py",
        "                leeway=s.leeway_s,",
        "                leeway=300,",
        TOKENS,
    ),
    Mutant(
        "admin-role-makes-every-token-admin",
        "api/tokens.py",
        "                admin=s.admin_role is not None and s.admin_role in roles,",
        "                admin=s.admin_role is not None,",
        TOKENS,
    ),
    Mutant(
        "key-digest-accepted-as-key",
        "api/keys.py",
        "        return self._by_digest.get(digest(key))",
        "        return self._by_digest.get(digest(key)) or self._by_digest.get(key)",
        ("tests/test_http_auth.py",),
    ),
    Mutant(
        "policy-specificity-inverted",
        "core/deciding/approvers.py",
        "        return (2 if self.tool is not None else 0) + (1 if self.agent is not None else 0)",
        "        return (1 if self.tool is not None else 0) + (2 if self.agent is not None else 0)",
        POLICIES,
    ),
    Mutant(
        "subagent-pause-announced-too",
        "core/run/loop.py",
        "        announcing = state.parent is None and self.writer.notifying",
        "        announcing = self.writer.notifying",
        ("tests/test_notifications.py",),
    ),
    Mutant(
        "decision-event-id-without-decider",
        "core/notifying/outbox.py",
        '    who = (entry.issuer or "", entry.subject or "", entry.decided_by or "")\n',
        "    who = ()\n",
        ("tests/test_notifications.py",),
    ),
    Mutant(
        "inbox-streams-counted-by-name",
        "api/inbox.py",
        "    close = service.streams.open(caller.id, caller.display)",
        "    close = service.streams.open(caller.name, caller.display)",
        TOKENS,
    ),
    Mutant(
        "jwks-url-scheme-not-checked",
        "api/tokens.py",
        "    if not (parts.scheme == \"https\" and parts.hostname) and not local:",
        "    if False:",
        TOKENS,
    ),
    Mutant(
        "jwks-file-not-read-at-start",
        "api/tokens.py",
        "                self._read_file(settings.jwks_file)\n",
        "                pass\n",
        TOKENS,
    ),
    Mutant(
        "keys-file-not-read-again",
        "api/keys.py",
        "        if stamp == self._stamp:\n            return",
        "        if True:\n            return",
        ("tests/test_http_auth.py",),
    ),
    Mutant(
        "refused-link-use-not-given-back",
        "api/decision_links.py",
        "        await store.release_link(claim.id, decider.id)\n",
        "",
        LINKS,
    ),
]

# ---- MCP, issue 41: hostile servers' listings and answers, cancelled calls, one-resource keys ---------
MCP_RAW = ("tests/test_mcp_hostile_raw.py",)
MODEL_CHOSEN_CALL_ID = (
    "tests/test_mcp_server.py::test_a_call_id_the_model_chose_is_shown_inert_where_to_decide_it",
)
NOT_TEXT = (
    "tests/test_newcomer_errors.py::"
    "test_a_decision_given_what_is_not_text_is_refused_naming_it_and_the_run_stays_paused",
)
MCP_CANCEL = ("tests/test_mcp_cancel.py",)
MUTANTS += [
    Mutant(
        "mcp-listing-not-guarded",
        "actors/mcp/wire.py",
        '            if method == "tools/list" and isinstance(message, JSONRPCResponse):\n',
        "            if False:\n",
        MCP_RAW,
    ),
    Mutant(
        "mcp-lone-surrogate-message-dropped",
        "actors/mcp/wire.py",
        "        mended = _mended(exc)\n",
        "        mended = None\n",
        MCP_RAW,
    ),
    Mutant(
        "mcp-unparsed-answer-dropped",
        "actors/mcp/wire.py",
        "        found = _answered(exc)\n",
        "        return exc\n",
        MCP_RAW,
    ),
    Mutant(
        "mcp-cancelled-call-not-cancelled-at-the-server",
        "actors/mcp/tools.py",
        "        except asyncio.CancelledError:\n"
        "            await self.connection.abandon(call)\n            raise\n",
        "        except asyncio.CancelledError:\n            raise\n",
        MCP_CANCEL,
    ),
    Mutant(
        "mcp-timed-out-call-not-cancelled-at-the-server",
        "actors/mcp/calls.py",
        "        except TimeoutError:\n            self.cancel()\n",
        "        except TimeoutError:\n",
        (
            "tests/test_mcp_cancel.py::test_a_call_past_the_servers_timeout_fails_and_is_cancelled_at_the_server",
        ),
    ),
    Mutant(
        "mcp-cancelled-open-leaves-its-session",
        "actors/mcp/connection.py",
        "        except (ToolNameConflictError, asyncio.CancelledError):\n",
        "        except ToolNameConflictError:\n",
        MCP_CANCEL,
    ),
    Mutant(
        "mcp-always-rule-ignored",
        "actors/mcp/tools.py",
        '        if name in rule.get("always", ()):\n            return True\n',
        "",
        ("tests/test_mcp_tools.py::test_an_always_rule_gates_a_tool_its_annotations_leave_ungated",),
    ),
    Mutant(
        "one-resource-key-must-name-it",
        "api/auth.py",
        "        if len(mine) == 1:\n            return mine[0]\n",
        "",
        (
            "tests/test_http_auth.py::test_a_key_with_one_resource_uses_it_unnamed_and_a_key_with_several_must_name_one",
            "tests/test_mcp_server.py",
        ),
    ),
]


# ---- Cancel, deadlines and calls in doubt (issue 41) -------------------------------------------------------
CANCEL = ("tests/test_cancel.py",)
CANCEL_WRITE = (
    "            await self.loop.writer.save(state, expected_version=stored.version, audit=entries)\n"
)
MUTANTS += [
    Mutant(  # one winner: a cancel whose compare-and-set lost to an approval is answered as if it had won
        "cancel-ignores-a-lost-compare-and-set",
        "core/run/cancels.py",
        "        except StaleSnapshotError:\n            return None\n",
        "        except StaleSnapshotError:\n            pass\n",
        ("tests/test_cancel.py::test_a_cancel_that_read_the_run_before_an_approval_landed_loses_to_it",),
    ),
    Mutant(  # durable before ack: the cancel is acknowledged without being written
        "cancel-acknowledged-before-durable",
        "core/run/cancels.py",
        CANCEL_WRITE,
        "            pass\n",
        ("tests/test_cancel_crash.py",),
    ),
    Mutant(  # no cancelled run resumes: recovery of a cancelled run goes on instead of ending it
        "cancelled-run-resumes-on-recovery",
        "core/run/loop.py",
        "        stop = state.cancel or self.stops.pop(state.run_id, None)\n",
        "        stop = self.stops.pop(state.run_id, None)\n",
        ("tests/test_cancel_crash.py",),
    ),
    Mutant(  # cascade: the subagents' runs are left as they were
        "cancel-does-not-cascade",
        "core/run/stopping.py",
        "        await self._cascade(state, cancellation)\n",
        "",
        CANCEL,
    ),
    Mutant(  # a late result never fed to a model: a stopped sync tool's call waits for its thread
        "cancelled-sync-tool-result-fed-to-the-model",
        "core/vocabulary/tool_threads.py",
        "                    call.late = late\n            raise\n",
        "                    call.late = late\n"
        "            while taken and call.outcome is None:\n"
        "                await asyncio.sleep(0.01)\n"
        "            if taken:\n"
        "                return call.outcome[0]\n"
        "            raise\n",
        CANCEL,
    ),
    Mutant(  # the in-doubt fence: a call taken over while its first host may still run it is decided at once
        "call-in-doubt-decided-at-once",
        "core/deciding/decisions.py",
        "    refuse_in_doubt(state.run_id, call, target.pause, now)\n",
        "",
        ("tests/test_late_results.py",),
    ),
    Mutant(  # the tool's timeout_s is not enforced
        "tool-timeout-ignored",
        "core/run/calls.py",
        "            async with asyncio.timeout(tool.timeout_s) as limit:\n",
        "            async with asyncio.timeout(None) as limit:\n",
        ("tests/test_cancel.py::test_a_tool_that_runs_past_its_timeout_is_a_tool_error_the_model_hears",),
    ),
    Mutant(  # the run's max_duration_s is not enforced
        "max-duration-ignored",
        "core/run/loop.py",
        "        deadline = _loop_time(state.duration_deadline())\n",
        "        deadline = None\n",
        ("tests/test_cancel.py::test_a_run_past_its_max_duration_ends_with_max_duration",),
    ),
    Mutant(  # who may cancel: anyone
        "cancel-by-anyone",
        "core/run/cancels.py",
        "    if not request.cascade:\n",
        "    if False:\n",
        ("tests/test_cancel_surfaces.py::test_who_may_cancel_a_run_over_http",),
    ),
    Mutant(  # MCP: a client's cancelled tool call leaves its run going
        "mcp-cancelled-call-leaves-the-run",
        "api/mcp_server.py",
        "        async with _cancelled_with(agent, run_id, caller):\n",
        "        async with contextlib.AsyncExitStack():\n",
        ("tests/test_cancel_mcp_served.py",),
    ),
]


# ---- Paging and scale (issue 42): listings read one page from the store's indexes; group commit --------
READS = "tests/test_listing_reads.py"
CONFORMANCE = "tests/test_store_conformance.py"
MUTANTS += [
    Mutant(
        "group-commit-writes-a-cancelled-caller",
        "storage/sqlite.py",
        "        if self.future.cancelled():\n            raise _Cancelled\n",
        "",
        ("tests/test_sqlite_group_commit.py",),
    ),
    Mutant(
        "checkpoint-due-by-changed-rows-alone",
        "storage/sqlite.py",
        "        return changes + self._body_pages\n",
        "        return changes\n",
        ("tests/test_sqlite_checkpoints.py",),
    ),
    Mutant(
        "roles-kept-after-the-run-left-the-listings",
        "storage/sqlite_listing.py",
        '                _drop_roles("old"),\n',
        "",
        (CONFORMANCE,),
    ),
    Mutant(
        "version-2-file-keeps-its-triggers",
        "storage/sqlite_listing.py",
        '        conn.execute(f"DROP TRIGGER IF EXISTS {name}")\n',
        "        pass\n",
        ("tests/test_sqlite_listings.py",),
    ),
    Mutant(
        "inbox-scans-every-run",
        "api/inbox.py",
        "    found = await runtime.pending_page(caller=caller, page=page, per_page=per_page, **filters)\n",
        # What the inbox did before: every paused run read and parsed, the page cut in Python.
        "    everything, cursor = [], None\n"
        "    while True:\n"
        "        part = await runtime.pending_page(caller=caller, per_page=1000, cursor=cursor)\n"
        "        everything += part.states\n"
        "        if part.next_cursor is None:\n"
        "            break\n"
        "        cursor = part.next_cursor\n"
        "    found = __import__('troupe.core.vocabulary.listing', fromlist=['PausedPage']).PausedPage(\n"
        "        everything[: per_page or 100], len(everything)\n"
        "    )\n",
        (READS,),
    ),
    Mutant(
        "memory-listing-parses-every-run",
        "storage/memory.py",
        "        ids, cursor = page_of(rows, query)\n",
        "        _ = [RunState.from_json(raw) for raw, _, _ in self._runs.values()]\n"
        "        ids, cursor = page_of(rows, query)\n",
        (READS,),
    ),
    Mutant(
        "sqlite-listing-reads-the-whole-index",
        "storage/sqlite_listing.py",
        'ORDER BY {order} LIMIT ?"',
        'ORDER BY {order} LIMIT -1 + 0 * ?"',
        (READS,),
    ),
    Mutant(
        "sqlite-total-counted-by-scan",
        "storage/sqlite_listing.py",
        "    if counter is not None and query.from_date is None and query.to_date is None:",
        "    if False:",
        (READS,),
    ),
    Mutant(
        "redis-listing-reads-every-run",
        "storage/redis_listing.py",
        "local cscore, cid, wanted = ARGV[5], ARGV[6], tonumber(ARGV[7])",
        "local cscore, cid, wanted = ARGV[5], ARGV[6], 1000000",
        (READS,),
    ),
    Mutant(
        "cursor-of-another-listing-accepted",
        "core/vocabulary/listing.py",
        "    if order != query.order or digest != query.filters_digest():",
        "    if False:",
        (f"{CONFORMANCE}::test_a_cursor_is_bound_to_its_listing_and_checked",),
    ),
    Mutant(
        "cursor-with-an-endless-number-is-a-500",
        "core/vocabulary/listing.py",
        "    try:\n        at = float(value)\n    except OverflowError:\n        return None\n",
        "    at = float(value)\n",
        ("tests/test_http_inbox.py::test_a_made_up_cursor_is_refused_whatever_number_it_holds",),
    ),
    Mutant(
        "memory-cursor-skips-ties",
        "storage/memory.py",
        "            begin = max(begin, bisect.bisect_right(entries, start))",
        "            begin = max(begin, bisect.bisect_right(entries, start.at, key=_at))",
        (f"{CONFORMANCE}::test_a_listing_is_read_a_page_at_a_time_in_a_stable_order",),
    ),
    Mutant(
        "redis-oldest-first-cuts-a-pause-time",
        "storage/redis_listing.py",
        "      if start < from then",
        "      if false then",
        (f"{CONFORMANCE}::test_a_listing_is_read_a_page_at_a_time_in_a_stable_order",),
    ),
    Mutant(
        "sqlite-counter-not-taken-down",
        "storage/sqlite_listing.py",
        '                *_count_down(_RUN_COUNTERS, "old", old),\n',
        "",
        (f"{CONFORMANCE}::test_totals_follow_every_write",),
    ),
    Mutant(
        "change-log-misses-a-run-leaving",
        "storage/memory.py",
        "        elif was is not None:\n            self._log(replace(was, listed=False))\n",
        "",
        (f"{CONFORMANCE}::test_the_change_log_says_what_entered_changed_and_left_the_listings",),
    ),
    Mutant(
        "inbox-stream-shows-other-tenants",
        "api/inbox_feed.py",
        "            if change.top_level and change.agent_id in served"
        " and self.caller.may(change.resource_id):",
        "            if True:",
        ("tests/test_http_inbox.py::test_changes_are_pushed_as_server_sent_events",),
    ),
    Mutant(
        "redis-old-indexes-not-rebuilt",
        "storage/redis_listing.py",
        "            if mark != LISTING_VERSION:",
        "            if False:",
        ("tests/test_redis_store.py::test_indexes_written_before_the_top_level_listings_are_rebuilt_once",),
    ),
    Mutant(
        "decision-finds-its-run-in-a-listing",
        "core/run/claim.py",
        "        stored = await self.store.load_run(request.run_id)\n",
        # The run found among the agent's suspended runs (every one of them read) instead of by its id.
        "        from troupe.core.vocabulary.store import StoredRun, SuspendedRunQuery, suspended_runs\n"
        "        every, _ = await suspended_runs(self.store, SuspendedRunQuery(self.agent_id))\n"
        "        found = [s for s in every if s.run_id == request.run_id]\n"
        "        stored = await self.store.load_run(request.run_id) if found else None\n",
        ("tests/test_sqlite_listings.py",),
    ),
    Mutant(
        "pause-roles-not-recorded",
        "core/run/pauses.py",
        '        if self.policies is None or kind != "approval" or state.parent is not None:',
        "        if True:",
        (
            "tests/test_http_inbox.py::test_the_inbox_is_read_a_page_at_a_time_and_narrowed_by_resource_role_and_age",
        ),
    ),
]

# ---- the house (issue 45): no import circle, nothing climbs back up, names that say one thing ----------
MUTANTS += [
    Mutant(
        "agent-types-its-runtime-again",
        "supervisor/agent.py",
        "from troupe.supervisor.agent_runtime import AgentRuntime, default_agent_runtime\n",
        # A type-only import (as under TYPE_CHECKING) of the runtime that imports the Agent: a circle.
        "from troupe.supervisor.agent_runtime import AgentRuntime, default_agent_runtime\n"
        "if False:\n    from troupe.supervisor.runtime import Runtime  # noqa: F401\n",
        ("tests/test_import_cycles.py::test_the_installed_package_has_no_import_circles",),
    ),
    Mutant(
        "vocabulary-climbs-to-deciding",
        "core/vocabulary/options.py",
        "from troupe.core.vocabulary.identity import Principal\n",
        "from troupe.core.vocabulary.identity import Principal\n"
        "if False:\n    from troupe.core.deciding.policy import governed  # noqa: F401\n",
        ("tests/test_contract.py::test_imports_run_one_way_and_ray_stays_in_actors_and_supervisor",),
    ),
    Mutant(
        "scripted-model-always-complete",
        "core/models/testing.py",
        "        if left:\n            raise AssertionError",
        "        if False:\n            raise AssertionError",
        ("tests/test_scripted_model.py",),
    ),
    Mutant(
        "mcp-answer-not-checked-against-the-store",
        "api/mcp_pauses.py",
        "    if asked is not None:\n",
        "    if False:\n",
        ("tests/test_mcp_server.py::test_an_answer_to_a_call_decided_meanwhile_decides_nothing_and_says_so",),
    ),
]


# ---- The public face (issue 45): run methods written once, docstrings, the serve shutdown, the inbox's words
FACE = "tests/test_public_docstrings.py"
MUTANTS += [
    Mutant(
        "agent-decision-loses-its-call",
        "supervisor/agent.py",
        "            tool_call_id=decision.tool_call_id,\n",
        "            tool_call_id=None,\n",
        ("tests/test_approval.py::test_wrong_ids_and_finished_runs_raise_clear_errors",),
    ),
    Mutant(
        "http-client-sends-who-acts",
        "api/client.py",
        "    if acting:\n        raise TypeError(",
        "    if False:\n        raise TypeError(",
        (f"{FACE}::test_the_async_client_refuses_who_acts_before_sending_anything",),
    ),
    Mutant(
        "stream-hides-its-options",
        "core/vocabulary/run_methods.py",
        "        duration_counts_waiting: bool | None = None,\n    ) -> AgentStream:",
        "        **options: Any,\n    ) -> AgentStream:",
        (f"{FACE}::test_the_run_methods_show_their_keyword_arguments",),
    ),
    Mutant(
        "docstring-leaves-an-argument-out",
        "api/client.py",
        "            run_id: The run (top-level or a subagent's).\n",
        "",
        (f"{FACE}::test_every_public_method_and_property_is_documented_with_its_arguments",),
    ),
    Mutant(
        "error-docstring-without-its-status",
        "core/vocabulary/errors.py",
        "``AGENT_RESUME_NO_SNAPSHOT_FOUND``, HTTP 404.",
        "``AGENT_RESUME_NO_SNAPSHOT_FOUND``.",
        (f"{FACE}::test_every_error_says_its_code_and_http_status",),
    ),
    Mutant(
        "serve-shutdown-unbounded",
        "api/serve.py",
        "        with _bounded(SHUTDOWN_S, code):",
        "        with contextlib.nullcontext():",
        ("tests/test_serve_lifecycle.py::test_a_sigterm_to_every_process_at_once_ends_serve_in_seconds",),
    ),
    Mutant(
        "inbox-shows-the-question-as-json",
        "api/static/inbox.js",
        'el("div", { "data-testid": "asks" }, asked(call.suspendPayload))',
        'el("pre", { "data-testid": "asks" }, pretty(call.suspendPayload))',
        (
            "tests/test_inbox_browser.py::test_a_suspension_is_answered_through_the_form_built_from_its_resume_schema",
        ),
    ),
    Mutant(
        "inbox-says-nothing-waits-below-a-decided-card",
        "api/static/inbox.js",
        "state.cards.size > waiting ?",
        "false ?",
        ("tests/test_inbox_browser.py::test_decline_with_a_reason_the_model_is_told",),
    ),
    Mutant(
        "demo-quotes-the-validator",
        "troupe/ops/demo.py",
        "            except ResumeDataValidationError:\n"
        '                print(f"Not accepted: {what_fits(pause.resume_schema)}. Please try again."',
        "            except ResumeDataValidationError as exc:\n"
        '                print(f"Not accepted: {exc.message}. Please try again."',
        ("tests/test_demo.py::test_a_non_integer_answer_is_asked_again",),
    ),
]

# perf
MUTANTS += [
    Mutant(
        "redis-save-keeps-left-indexes",
        "storage/redis_scripts.py",
        "if not now[index] then redis.call('ZREM', index, run_id) end",
        "if false then redis.call('ZREM', index, run_id) end",
        ("tests/test_store_conformance.py", "tests/test_redis_store.py"),
    ),
]

# A subagent's run, listed under its own agent, says where it is decided
MUTANTS += [
    Mutant(
        "subagent-run-listed-without-where-it-is-decided",
        "core/vocabulary/pause_shapes.py",
        "    above = None if parent is None else DelegatedBy(",
        "    above = None if True else DelegatedBy(",
        ("tests/test_approver_policies.py::test_a_subagents_run_is_decided_only_through_the_top",),
    ),
    Mutant(
        "subagent-run-listed-over-http-without-where-it-is-decided",
        "api/wire.py",
        '        "delegatedBy": _delegated_by(run.delegated_by),\n',
        "",
        ("tests/test_approver_policies.py::test_an_http_caller_cannot_decide_a_subagents_run_around_the_top",),
    ),
    Mutant(
        "notebook-offers-buttons-on-a-subagents-run",
        "troupe/ops/notebook.py",
        "        if run.delegated_by is not None:\n            # A subagent's run",
        "        if False:\n            # A subagent's run",
        ("tests/test_notebook.py::test_a_subagents_run_gets_no_buttons_only_where_it_is_decided",),
    ),
]

# Audit fixes: the Redis listing and the HTTP front door
LINK_FAILURE = (
    "tests/test_decision_links.py::"
    "test_a_failure_while_deciding_gives_the_link_back_and_keeps_its_token_out_of_logs"
)
MUTANTS += [
    Mutant(
        "redis-cursor-rounds-its-place",
        "storage/redis_listing.py",
        "  reply[#reply + 1] = found[i][3]\n",
        "  reply[#reply + 1] = tostring(found[i][2])\n",
        ("tests/test_store_conformance.py::test_a_cursor_keeps_pause_times_to_the_microsecond",),
    ),
    Mutant(
        "json-routes-take-simple-requests-from-another-site",
        "api/app.py",
        "    json_only = [Depends(refuse_simple_cross_site)]\n",
        "    json_only: list[Any] = []\n",
        (
            "tests/test_identity_host_app.py::"
            "test_a_json_route_refuses_what_another_site_could_send_under_the_apps_session",
            "tests/test_decision_link_browser.py::test_a_page_on_another_site_cannot_approve_through_the_json_routes",
        ),
    ),
    Mutant(
        "link-given-back-only-after-troupes-own-errors",
        "api/decision_links.py",
        "    except Exception:\n        # Whatever stopped it",
        "    except TroupeError:\n        # Whatever stopped it",
        (LINK_FAILURE,),
    ),
    Mutant(
        "link-failure-logs-its-token",
        "api/decision_links.py",
        "redact_links(request.url.path), exc_info=error)",
        "request.url.path, exc_info=error)",
        (LINK_FAILURE,),
    ),
    Mutant(
        "unexpected-error-logs-a-links-token",
        "api/app.py",
        "    path = decision_links.redact_links(request.url.path)",
        "    path = request.url.path",
        (LINK_FAILURE,),
    ),
    Mutant(
        "link-form-parsed-before-its-token-is-checked",
        "api/decision_links.py",
        "        claim = await _open(service, token)\n        form = _form(await request.body())\n",
        "        form = _form(await request.body())\n        claim = await _open(service, token)\n",
        ("tests/test_decision_links.py::test_a_links_form_is_read_only_for_a_genuine_token_and_bounded",),
    ),
    Mutant(
        "link-page-calls-a-call-in-doubt-a-wrong-decision",
        "api/decision_links.py",
        '        return _page("Not decided", waits, error.http_status)',
        '        return _page("Not decided", waits, 422)',
        ("tests/test_decision_links.py::test_a_call_in_doubt_is_not_decided_through_its_link_yet_and_says_so",),
    ),
    Mutant(
        "approval-whose-resume-data-declines-is-taken-as-a-decline",
        "core/deciding/decisions.py",
        "    if decision.approved is not None and decision.approved != answer.approved:",
        "    if False:",
        ("tests/test_strict_decisions.py::test_an_approval_whose_resume_data_declines_is_refused_as_contradictory",),
    ),
]

# Audit fixes: decisions and the memory store
MUTANTS += [
    Mutant(
        "memory-store-counts-a-backwards-range-below-zero",
        "storage/memory.py",
        "            total += max(within, 0)\n",
        "            total += within\n",
        ("tests/test_store_conformance.py::test_listings_filter_by_agent_resource_thread_top_level_role_and_age",),
    ),
    Mutant(
        "memory-store-gives-a-thread-the-resource-of-an-empty-append",
        "storage/memory.py",
        "        if thread is not None and thread.messages:\n",
        "        if thread is not None:\n",
        ("tests/test_store_conformance.py::test_an_append_of_no_messages_starts_no_thread",),
    ),
    Mutant(
        "memory-store-takes-a-position-past-its-log-for-a-complete-read",
        "storage/memory.py",
        "        if seen > self._change_seq or seen < oldest - 1:\n",
        "        if seen < oldest - 1:\n",
        (
            "tests/test_store_conformance.py::"
            "test_a_position_past_the_end_of_the_change_log_is_not_taken_for_a_complete_read",
        ),
    ),
    Mutant(
        "decision-claimed-while-the-step-runs-on-another-host",
        "core/deciding/decisions.py",
        "    refuse_in_flight(state, call)\n",
        "",
        ("tests/test_guarantees.py::test_a_call_is_not_decided_on_another_host_while_its_step_still_runs",),
    ),
    Mutant(
        "resume-data-that-cannot-be-stored-is-claimed",
        "core/deciding/decisions.py",
        '    refuse_unstorable("resume data", call, data, ResumeDataValidationError)\n',
        "",
        ("tests/test_suspend.py::test_resume_data_that_cannot_be_stored_is_refused_before_anything_is_claimed",),
    ),
    Mutant(
        "edited-args-that-cannot-be-stored-are-claimed",
        "core/deciding/decisions.py",
        '    refuse_unstorable("edited args", call, edited, DecisionRejectedError)\n    # A key the schema',
        "    # A key the schema",
        ("tests/test_approval.py::test_edited_args_naming_a_key_the_tool_does_not_have_are_refused",),
    ),
    Mutant(
        "edited-args-with-an-unknown-key-are-accepted",
        "core/deciding/decisions.py",
        "    unknown = unknown_keys(tool.input_schema, edited)\n",
        "    unknown: list[str] = []\n",
        ("tests/test_approval.py::test_edited_args_naming_a_key_the_tool_does_not_have_are_refused",),
    ),
    Mutant(
        "edit-merged-key-by-key-under-another-alias",
        "core/deciding/decisions.py",
        "    merged = edit_over(tool.input_schema, call.args, edited)\n",
        "    merged = {**call.args, **edited}\n",
        ("tests/test_approval.py::test_an_edit_may_name_a_field_by_its_alias_and_add_keys_a_schema_keeps",),
    ),
    Mutant(
        "edit-keys-a-schema-keeps-called-unknown",
        "core/deciding/decider_input.py",
        '    if schema.model_config.get("extra") == "allow":\n',
        "    if False:\n",
        ("tests/test_approval.py::test_an_edit_may_name_a_field_by_its_alias_and_add_keys_a_schema_keeps",),
    ),
]


# Audit fixes: MCP, A2A and AG-UI
AGUI_SAME_CALL = "tests/test_agui.py::test_two_runs_of_a_thread_with_the_same_call_id_are_two_interrupts"
MCP_UNFIT = (
    "tests/test_mcp_server.py::test_an_accepted_answer_that_does_not_fit_the_question_decides_nothing",
    "tests/test_mcp_server_js.py::test_typescript_client_accepting_with_content_that_does_not_fit_decides_nothing",
)
MUTANTS += [
    Mutant(
        "mcp-accept-that-does-not-fit-is-a-decline",
        "api/mcp_pauses.py",
        "        return await agent.resume_generate(content, **options)\n",
        "        if self.is_approval and content != {'approved': True}:\n"
        "            return await agent.decline_tool_call_generate(**options)\n"
        "        return await agent.resume_generate(content, **options)\n",
        MCP_UNFIT,
    ),
    Mutant(
        "mcp-refused-answer-by-request-state-is-a-bare-error",
        "api/mcp_server.py",
        "            except DecisionRejectedError as exc:  # e.g. an answer",
        "            except ValueError as exc:  # e.g. an answer",
        MCP_UNFIT,
    ),
    Mutant(
        "a2a-error-quotes-the-remotes-url-with-its-credentials",
        "actors/a2a/agent.py",
        "    return _URL.sub(shown, text)\n",
        "    return text\n",
        (
            "tests/test_a2a_remote.py::"
            "test_a_credential_in_the_remote_agents_url_reaches_no_tool_error_chunk_store_or_log",
        ),
    ),
    Mutant(
        "a2a-answer-applied-before-it-is-checked-whole",
        "api/a2a_server.py",
        "            _check_all(call, state, decisions)\n",
        "            pass\n",
        ("tests/test_a2a_server.py::test_an_answer_with_one_refused_decision_decides_none_of_them",),
    ),
    Mutant(
        "a2a-answer-check-ignores-the-fingerprint",
        "api/a2a_server.py",
        "        fits = [p for p in named if item.fingerprint in (None, p.call.fingerprint)]\n",
        "        fits = named\n",
        ("tests/test_a2a_server.py::test_an_answer_with_one_refused_decision_decides_none_of_them",),
    ),
    Mutant(
        "mcp-prompt-unbounded",
        "api/mcp_server.py",
        "        if len(prompt) > MAX_TEXT_CHARS:  # the same bound",
        "        if False:  # the same bound",
        ("tests/test_mcp_server.py::test_what_api_refuses_as_too_long_or_not_text_starts_no_run_over_mcp",),
    ),
    Mutant(
        "mcp-ids-unbounded-and-non-text-ignored",
        "api/mcp_server.py",
        "    if not isinstance(value, str) or len(value) > MAX_ID_CHARS:\n",
        "    if not isinstance(value, str):\n        return None\n    if False:\n",
        ("tests/test_mcp_server.py::test_what_api_refuses_as_too_long_or_not_text_starts_no_run_over_mcp",),
    ),
    Mutant(
        "a2a-page-token-unbounded",
        "api/a2a_messages.py",
        " or len(token) > 10 or int(token) > MAX_PAGE_NUMBER:",
        ":",
        (f"{A2A_SERVER}::test_a_page_token_or_context_past_every_bound_is_invalid_params_and_starts_nothing",),
    ),
    Mutant(
        "a2a-context-id-unbounded",
        "api/a2a_messages.py",
        "    if len(message.context_id) > MAX_ID_CHARS:\n",
        "    if False:\n",
        (f"{A2A_SERVER}::test_a_page_token_or_context_past_every_bound_is_invalid_params_and_starts_nothing",),
    ),
    Mutant(
        "a2a-task-without-context-stores-no-thread",
        "api/a2a_server.py",
        '        options["thread_id"] = context_id\n',
        '        options["thread_id"] = message.context_id or None\n',
        (f"{A2A_SERVER}::test_a_task_started_without_a_context_is_listed_under_the_context_it_was_told",),
    ),
    Mutant(
        "agui-interrupt-id-names-no-run",
        "api/agui_interrupts.py",
        '    return f"{call}@{run_id}"\n',
        "    return call\n",
        (AGUI_SAME_CALL,),
    ),
    Mutant(
        "agui-resume-ends-in-success-while-the-thread-waits",
        "api/agui.py",
        "        for event in self._finished(await self.open_pauses()):",
        "        for event in self._finished(await self.open_pauses() if self.translator.paused else []):",
        (AGUI_SAME_CALL,),
    ),
    Mutant(
        "a2a-answer-refused-part-way-said-not-taken",
        "api/a2a_server.py",
        "            taken.append(item.tool_call_id)\n",
        "",
        ("tests/test_a2a_server.py::test_an_answer_refused_part_way_names_the_decisions_it_took",),
    ),
    # Audit fixes: the operator CLI
    Mutant(
        "cli-cancel-without-as-is-the-process",
        "troupe/ops/operator.py",
        '        return {"decided_by": ANONYMOUS_OPERATOR, "surface": "cli"}\n',
        '        return {"surface": "cli"}\n',
        (
            "tests/test_cancel_surfaces.py::test_troupe_runs_cancel_of_a_governed_run_needs_someone_the_policy_names",
        ),
    ),
    Mutant(
        "cli-server-url-not-checked",
        "troupe/ops/run_source.py",
        "        client = AsyncTroupeClient(_server_url(args.server), api_key=credential, timeout=60.0)\n",
        "        client = AsyncTroupeClient(args.server, api_key=credential, timeout=60.0)\n",
        ("tests/test_operator_safety.py::test_malformed_urls_are_one_line_without_the_password",),
    ),
    Mutant(
        "cli-redis-url-not-checked",
        "troupe/ops/run_source.py",
        "        _check_redis_url(url)\n",
        "",
        ("tests/test_operator_safety.py::test_malformed_urls_are_one_line_without_the_password",),
    ),
    Mutant(
        "cli-redis-url-message-keeps-the-password",
        "troupe/ops/run_source.py",
        '        reason = str(exc).replace(password, "***") if password else str(exc)\n',
        '        reason = f"{exc} in {url}"\n',
        ("tests/test_operator_safety.py::test_malformed_urls_are_one_line_without_the_password",),
    ),
    Mutant(
        "client-non-json-answer-a-traceback",
        "api/client.py",
        "        except ValueError as exc:  # a login page, a proxy's: not a Troupe server's answer",
        "        except KeyError as exc:  # a login page, a proxy's: not a Troupe server's answer",
        ("tests/test_operator_safety.py::test_a_server_that_is_not_troupe_is_named_not_read_as_nothing_waiting",),
    ),
    Mutant(
        "client-listing-answer-not-checked",
        "api/client.py",
        "        if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):\n",
        "        if False:\n",
        ("tests/test_operator_safety.py::test_a_server_that_is_not_troupe_is_named_not_read_as_nothing_waiting",),
    ),
    Mutant(
        "cli-recall-trusts-a-records-time",
        "troupe/ops/recall.py",
        "    return isinstance(at, int | float) and not isinstance(at, bool) and now - at < KEEP_S\n",
        "    return isinstance(entry, dict) and now - float(entry.get(\"at\", 0)) < KEEP_S\n",
        ("tests/test_operator_safety.py::test_a_damaged_decisions_file_is_forgotten_not_a_traceback",),
    ),
]

# Audit fixes: the run loop and the model client
OWN_TIMEOUT_ERROR = (
    "tests/test_loop.py::test_a_tool_raising_its_own_timeout_error_is_a_tool_error_beside_its_sibling"
)
MUTANTS += [
    Mutant(
        "tool-own-timeout-error-fails-the-run",
        "core/run/calls.py",
        "                _failed(run, call, exc)\n                return\n            why[0]",
        "                raise\n            why[0]",
        (f"{OWN_TIMEOUT_ERROR}[local-no-timeout]",),
    ),
    Mutant(
        "model-text-checked-quadratically",
        "core/run/turn.py",
        "            said += len(event.text)\n",
        "            said = sum(map(len, text)) + len(event.text)\n",
        ("tests/test_model_output.py::test_checking_the_turns_text_costs_the_same_for_every_delta",),
    ),
    Mutant(
        "model-text-limit-per-delta",
        "core/run/turn.py",
        "            said += len(event.text)\n",
        "",
        (
            "tests/test_model_output.py::"
            "test_the_turns_text_is_refused_one_character_past_the_limit_however_it_is_cut",
        ),
    ),
    Mutant(
        "subagent-start-failure-fails-the-supervisor",
        "core/run/delegation.py",
        "                    return ChildFailed(link, "
        'f"the subagent could not start: {type(exc).__name__}: {exc}")\n',
        "                    raise\n",
        (
            "tests/test_supervisor.py::"
            "test_a_subagent_whose_run_cannot_start_is_a_tool_error_the_supervisor_hears[local]",
        ),
    ),
    Mutant(
        "repeated-call-id-kept",
        "core/run/turn.py",
        "    if part.id not in earlier:\n",
        "    if True:\n",
        ("tests/test_supervisor.py::test_a_call_id_the_model_repeats_in_a_later_step_delegates_afresh[local]",),
    ),
    Mutant(
        "openai-stream-without-finish-is-a-turn",
        "core/models/openai_model.py",
        "        if finish is None:\n",
        "        if False:\n",
        (
            "tests/test_openai_model.py::test_a_stream_that_ends_before_its_finish_reason_is_a_model_error",
            "tests/test_openai_model.py::"
            "test_a_tool_call_cut_off_before_its_arguments_fails_the_run_and_never_runs",
        ),
    ),
    Mutant(
        "openai-calls-at-one-index-merged",
        "core/models/openai_model.py",
        '        if slot is None or (piece.id and slot["id"] and piece.id != slot["id"]):\n',
        "        if slot is None:\n",
        ("tests/test_openai_model.py::test_two_calls_sent_at_one_index_with_their_own_ids_stay_two_calls",),
    ),
]


# Audit fixes: the MCP client
MCP_DEATH = (
    "tests/test_mcp_server_death.py::test_a_server_that_dies_mid_call_is_started_again_for_the_next_run[local]",
)
MUTANTS += [
    Mutant(
        "mcp-dead-server-stays-alive",
        "actors/mcp/connection.py",
        "        self._closing.set()\n\n    async def close(self) -> None:\n",
        "\n    async def close(self) -> None:\n",
        MCP_DEATH,
    ),
    Mutant(
        "mcp-answer-no-json-rpc-waits-its-timeout",
        "actors/mcp/wire.py",
        "        return _misshapen(exc.errors(include_url=False))\n",
        "        return None\n",
        (
            "tests/test_mcp_hostile_raw.py::test_an_answer_that_is_no_json_rpc_response_fails_the_call_at_once"
            "[local-stdio-null]",
        ),
    ),
    Mutant(
        "mcp-error-in-structured-content-lost",
        "actors/mcp/results.py",
        "    if structured is not None and not told:\n",
        "    if structured is not None and not result.get(\"isError\"):\n",
        ("tests/test_mcp_hostile.py::test_an_error_told_only_in_structured_content_reaches_the_model[local]",),
    ),
]

# Audit fixes: notifications
CHAT_MESSAGE = "tests/test_chat_message.py"
BAD_TARGET_URL = (
    "tests/test_notifications.py::"
    "test_a_target_url_no_client_can_send_to_is_refused_or_a_failed_attempt_with_its_error"
)
MALFORMED_NOTIFY = (
    "tests/test_notifications.py::test_a_malformed_notify_file_is_refused_with_the_field_it_gets_wrong"
)
FRESH_LINKS = (
    "tests/test_notifications.py::test_a_retry_after_the_links_expired_sends_fresh_ones_under_the_same_webhook_id"
)
MUTANTS += [
    Mutant(
        "chat-message-keeps-slacks-control-characters",
        "core/notifying/chat_message.py",
        '    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")\n',
        "    return text\n",
        (CHAT_MESSAGE,),
    ),
    Mutant(
        "chat-message-keeps-hidden-characters",
        "core/notifying/chat_message.py",
        "    text = visible(str(value))\n",
        "    text = str(value)\n",
        (CHAT_MESSAGE,),
    ),
    Mutant(
        "chat-message-cuts-arguments-without-a-note",
        "core/notifying/chat_message.py",
        "    if len(shown) > _ARGS_CHARS:\n",
        "    if False:\n",
        (CHAT_MESSAGE,),
    ),
    Mutant(
        "decision-event-id-names-the-display-name-not-the-person",
        "core/notifying/outbox.py",
        '    who = (entry.issuer or "", entry.subject or "", entry.decided_by or "")\n',
        '    who = (entry.decided_by or "",)\n',
        (
            "tests/test_notifications.py::test_each_approver_of_a_quorum_gets_an_event_of_their_own",
            "tests/test_notifications.py::test_a_decisions_event_id_is_its_own_and_the_same_each_time_it_is_built",
        ),
    ),
    Mutant(
        "decision-event-id-ignores-when",
        "core/notifying/outbox.py",
        "*who, entry.decided_at.isoformat()\n",
        "*who\n",
        ("tests/test_notifications.py::test_each_answer_to_a_tool_that_asks_twice_is_announced",),
    ),
    Mutant(
        "link-ttl-unchecked",
        "core/notifying/links.py",
        '        check_seconds(self.ttl_s, "decision links: ttl_s")\n',
        "        pass\n",
        ("tests/test_notifications.py::test_a_links_ttl_must_be_a_finite_number_of_seconds_above_zero",),
    ),
    Mutant(
        "delivery-whose-request-cannot-be-made-is-not-counted",
        "core/notifying/dispatcher.py",
        '            return attempt_error(target, "the request could not be made: ", exc)\n',
        "            raise\n",
        (
            "tests/test_notifications.py::"
            "test_a_delivery_whose_request_cannot_be_made_is_a_failed_attempt_that_backs_off",
        ),
    ),
    Mutant(
        "retried-delivery-resends-expired-links",
        "core/notifying/links.py",
        "            if source is None or kept.expires_at > until or kept.expires_at >= record.expires_at:\n",
        "            if True:\n",
        (FRESH_LINKS,),
    ),
    Mutant(
        "retried-delivery-resends-links-that-expire-on-the-way",
        "core/notifying/dispatcher.py",
        "source=entry.id, now=now, fresh_for_s=fresh_for\n",
        "source=entry.id, now=now\n",
        (FRESH_LINKS,),
    ),
    Mutant(
        "notify-file-retry-unknown-keys-pass",
        "core/notifying/outbox.py",
        "    if unknown:\n",
        "    if False:\n",
        (MALFORMED_NOTIFY,),
    ),
    Mutant(
        "notify-retry-times-unchecked",
        "core/notifying/outbox.py",
        '            check_seconds(getattr(self, name), f"retry.{name}")\n',
        "            pass\n",
        (MALFORMED_NOTIFY,),
    ),
    Mutant(
        "notify-filter-string-read-as-its-letters",
        "core/notifying/outbox.py",
        "    if isinstance(value, str) or not isinstance(value, Iterable):\n",
        "    if not isinstance(value, Iterable):\n",
        (MALFORMED_NOTIFY,),
    ),
    Mutant(
        "target-url-port-unchecked",
        "core/notifying/outbox.py",
        "        parts.port  # noqa: B018 (read for its check: a port out of 0-65535 raises)\n",
        "        pass\n",
        (BAD_TARGET_URL,),
    ),
    Mutant(
        "target-url-spaces-and-control-characters-pass",
        "core/notifying/outbox.py",
        "    if not isinstance(url, str) or any(c.isspace() or hidden(c) for c in url):\n",
        "    if not isinstance(url, str):\n",
        (BAD_TARGET_URL,),
    ),
    Mutant(
        "sender-request-that-cannot-be-made-raises",
        "actors/webhook_sender.py",
        '            return attempt_error(target, "the request could not be made: ", exc)\n',
        "            raise\n",
        (BAD_TARGET_URL,),
    ),
    Mutant(
        "link-token-mac-decoded-leniently",
        "core/notifying/links.py",
        "    if _b64(raw) != text:\n",
        "    if False:\n",
        ("tests/test_decision_links.py::test_a_token_with_anything_added_to_its_mac_is_not_genuine",),
    ),
    Mutant(
        "outcome-lost-in-outage",
        "core/run/in_doubt.py",
        "                    self.kept.setdefault(state.run_id, []).extend(entries)\n",
        "                    pass\n",
        (
            "tests/test_redis_outage.py::"
            "test_an_approved_tool_that_completes_while_redis_is_down_is_not_asked_about_again",
        ),
    ),
    Mutant(
        "sqlite-folder-error-raw",
        "storage/sqlite.py",
        "            except OSError as exc:  # its folder cannot be made",
        "            except ImportError as exc:  # its folder cannot be made",
        ("tests/test_newcomer_errors.py::test_a_sqlite_store_whose_folder_cannot_be_made_is_unavailable_and_named",),
    ),
    Mutant(
        "inbox-feed-moves-on-before-its-frame",
        "api/inbox_feed.py",
        "                frame = await self._changes(batch.changes)\n"
        "                self.position = batch.position\n",
        "                self.position = batch.position\n"
        "                frame = await self._changes(batch.changes)\n",
        (
            "tests/test_redis_outage.py::"
            "test_an_inbox_stream_whose_look_fails_in_an_outage_sends_what_it_missed_once_redis_is_back",
        ),
    ),
    Mutant(
        "unreadable-run-stops-supervision",
        "supervisor/reconciler.py",
        "        except UNREADABLE as exc:\n",
        "        except ImportError as exc:\n",
        ("tests/test_recovery.py::test_a_run_that_cannot_be_read_does_not_keep_the_others_from_being_recovered",),
    ),
    Mutant(
        "unreadable-run-stops-expiry",
        "core/run/engine.py",
        "            except UNREADABLE as exc:  # not this Troupe's to decline",
        "            except ImportError as exc:  # not this Troupe's to decline",
        ("tests/test_expiry.py::test_a_run_that_cannot_be_read_does_not_keep_other_pauses_from_expiring",),
    ),
    Mutant(
        "unreadable-paused-run-fails-every-listing",
        "core/vocabulary/listing.py",
        "        except UNREADABLE as exc:\n",
        "        except ImportError as exc:\n",
        (
            "tests/test_store_conformance.py::"
            "test_a_paused_run_this_troupe_cannot_read_is_left_out_of_the_page_not_the_end_of_it",
        ),
    ),
    Mutant(
        "unreadable-run-stops-the-inbox-stream",
        "api/inbox_feed.py",
        "    except UNREADABLE:\n",
        "    except ImportError:\n",
        ("tests/test_http_inbox.py::test_an_inbox_stream_leaves_out_a_run_it_cannot_read_and_goes_on",),
    ),
    Mutant(
        "decision-given-a-number-for-text",
        "core/vocabulary/run_methods.py",
        "        text_or_none(reason=reason, tool_call_id=self.tool_call_id, fingerprint=self.fingerprint)\n",
        "        pass\n",
        NOT_TEXT,
    ),
    Mutant(
        "cancel-given-a-number-for-text",
        "core/vocabulary/run_methods.py",
        "        text_or_none(reason=self.reason, tool_call_id=self.tool_call_id, "
        "fingerprint=self.fingerprint)\n",
        "        pass\n",
        NOT_TEXT,
    ),
    Mutant(
        "newer-sqlite-file-opened",
        "storage/sqlite.py",
        "            refuse_newer(conn, self.path)\n",
        "            pass\n",
        ("tests/test_sqlite_listings.py::test_a_file_a_newer_troupe_wrote_is_refused_before_anything_is_written_to_it",),
    ),
    Mutant(
        "agent-defaults-checked-at-every-call-only",
        "core/vocabulary/options.py",
        "        RunOptions(**options).validate()\n",
        "        RunOptions(**options)\n",
        (
            "tests/test_newcomer_errors.py::"
            "test_default_options_every_run_would_refuse_are_refused_when_the_agent_is_made",
        ),
    ),
    Mutant(
        "full-redis-is-a-fault-not-an-outage",
        "storage/redis_link.py",
        "    redis_errors.OutOfMemoryError,\n",
        "",
        ("tests/test_redis_store.py::test_a_full_redis_is_an_outage_and_the_write_lands_once_it_has_room",),
    ),
    Mutant(
        "mcp-paused-cli-suggestion-unquoted",
        "api/mcp_pauses.py",
        '            "cli": shlex.join(cli),\n',
        '            "cli": " ".join(cli),\n',
        MODEL_CHOSEN_CALL_ID,
    ),
    Mutant(
        "mcp-paused-text-keeps-hidden-characters",
        "api/mcp_pauses.py",
        '    text = visible(text, keep="\\n")',
        "    text = text",
        MODEL_CHOSEN_CALL_ID,
    ),
    Mutant(
        "observer-takes-the-callers-chunks",
        "actors/host.py",
        "                if outbox.read:  # its reader reads on: this one gets an outbox of its own\n",
        "                if False:\n",
        ("tests/test_observers.py",),
    ),
    Mutant(
        "evicting-redis-unnamed",
        "storage/redis.py",
        '        if policy != "noeviction":\n',
        "        if False:\n",
        ("tests/test_redis_store.py::test_a_redis_that_evicts_keys_when_full_is_named_once",),
    ),
    Mutant(
        "mcp-sdk-missing-not-named",
        "actors/mcp/connection.py",
        "            client_class = _sdk_client()\n            async with client_class(\n",
        "            from mcp import Client as client_class\n\n            async with client_class(\n",
        ("tests/test_newcomer_errors.py::test_an_mcp_server_without_the_sdk_says_which_extra_to_install",),
    ),
    Mutant(
        "troupe-mcp-without-sdk-traceback",
        "troupe/ops/mcp_stdio.py",
        "    except ImportError as exc:\n        raise SystemExit(",
        "    except ModuleNotFoundError as exc:\n        raise\n        raise SystemExit(",
        ("tests/test_newcomer_errors.py::test_troupe_mcp_without_the_sdk_says_which_extra_to_install",),
    ),
    Mutant(
        "tool-list-item-not-checked",
        "core/run/agent.py",
        'else [(getattr(tool, "id", ""), tool, ',
        "else [(tool.id, tool, ",
        ("tests/test_newcomer_errors.py::test_what_is_not_a_tool_is_named",),
    ),
    Mutant(
        "subagents-in-a-list-unchecked",
        "core/run/agent.py",
        "        if agents is not None and not isinstance(agents, Mapping):\n",
        "        if False:\n",
        ("tests/test_newcomer_errors.py::test_subagents_in_a_list_are_told_they_go_in_a_dict",),
    ),
    Mutant(
        "runtime-registers-what-is-not-an-agent",
        "supervisor/runtime.py",
        "        if not isinstance(agent, Agent):\n            raise TypeError(",
        "        if False:\n            raise TypeError(",
        ("tests/test_newcomer_errors.py::test_what_is_not_an_agent_is_named_by_the_runtime",),
    ),
    Mutant(
        "blocking-client-help-keeps-await",
        "api/sync_client.py",
        "    call.__doc__ = _blocking_doc(method.__doc__, stream=False)\n",
        "    pass\n",
        ("tests/test_public_docstrings.py::test_the_blocking_client_reads_as_blocking_in_help",),
    ),
    Mutant(
        "a2a-without-sdk-bare-404",
        "api/a2a_http.py",
        "        return _not_installed_router()\n",
        "        return APIRouter()\n",
        (NOT_INSTALLED_ROUTES,),
    ),
    Mutant(
        "mcp-without-sdk-bare-404",
        "api/not_installed.py",
        '        return http_error(not_installed("MCP", "MCP SDK", "mcp"))\n',
        "        return http_error(HTTPException(404))\n",
        (NOT_INSTALLED_ROUTES,),
    ),
    Mutant(
        "tool-function-arity-unchecked",
        "core/vocabulary/tools.py",
        "        signature.bind(None, None)\n",
        "        signature.bind\n",
        ("tests/test_newcomer_errors.py::test_a_tool_function_that_cannot_take_input_and_ctx_is_refused_when_the_tool_is_made",),
    ),
    Mutant(
        "numeric-id-option-unchecked",
        "core/vocabulary/options.py",
        "        text_or_none(thread_id=self.thread_id, resource_id=self.resource_id, run_id=self.run_id)\n",
        "        pass\n",
        ("tests/test_newcomer_errors.py::test_a_numeric_id_is_an_invalid_option_naming_it_and_starts_nothing",),
    ),
    Mutant(
        "unpicklable-agent-left-to-rays-walk",
        "actors/remote.py",
        "            unpicklable = _unpicklable(recipe.args)\n",
        "            unpicklable = None\n",
        ("tests/test_newcomer_errors.py::test_a_tool_holding_what_cannot_travel_to_its_ray_actor_says_what_and_what_to_do",),
    ),
    Mutant(
        "tool-id-unchecked",
        "core/vocabulary/tools.py",
        "    if not (isinstance(id, str) and id):\n",
        "    if False:\n",
        ("tests/test_newcomer_errors.py::test_a_tool_id_that_is_no_name_is_refused_when_the_tool_is_made",),
    ),
    Mutant(
        "mcp-fallback-answers-without-a-credential",
        "api/not_installed.py",
        '            await gate.authenticate(request.headers.get("authorization"))\n',
        "            pass\n",
        (NOT_INSTALLED_ROUTES,),
    ),
]


# Who may decide, on every surface: credentials that stop holding, keys of the identity provider.
INBOX_REVOKED = (
    "tests/test_http_inbox.py::test_an_event_stream_ends_when_its_key_is_revoked_and_follows_its_resources",
)
JWKS_DRIP = (
    "tests/test_identity_tokens.py::test_a_jwks_answer_that_never_ends_is_cut_off_and_the_keys_held_stay"
)
JWKS_STOPS = (
    "tests/test_identity_tokens.py::"
    "test_an_issuer_that_stops_answering_holds_up_no_token_of_a_key_already_held",
)
RUN_STREAM_REVOKED = "tests/test_revoked_streams.py::"
HOST_SIGNED_OUT = (
    "tests/test_identity_host_app.py::test_an_event_stream_under_the_apps_login_ends_when_its_session_does",
)
SSE_REVOKED = (RUN_STREAM_REVOKED + "test_a_run_stream_ends_when_its_key_is_revoked",)
MUTANTS += [
    Mutant(
        "run-stream-chunks-unchecked",
        "core/vocabulary/stream.py",
        "                await self._check()\n",
        "                pass\n",
        SSE_REVOKED,
    ),
    Mutant(
        "sse-run-stream-outlives-its-credential",
        "api/sse.py",
        "        frames(held(stream, request, caller)),\n",
        "        frames(stream),\n",
        SSE_REVOKED,
    ),
    Mutant(
        "agui-run-stream-outlives-its-credential",
        "api/agui.py",
        "            async for chunk in held(stream, self.request, self.caller).full_stream:\n",
        "            async for chunk in stream.full_stream:\n",
        (RUN_STREAM_REVOKED + "test_an_agui_run_ends_with_a_run_error_when_its_key_is_revoked",),
    ),
    Mutant(
        "a2a-task-stream-outlives-its-credential",
        "api/a2a_server.py",
        "            stream = held(stream, self.request, self.caller)\n",
        "            pass\n",
        (RUN_STREAM_REVOKED + "test_an_a2a_task_stream_ends_with_a_json_rpc_error_when_its_key_is_revoked",),
    ),
    Mutant(
        "mcp-answer-outlives-its-credential",
        "api/mcp_server.py",
        "            await self._still_held(ctx, caller)  # before the run's result or its next question"
        " goes out\n",
        "            pass\n",
        (RUN_STREAM_REVOKED + "test_an_mcp_tool_call_gets_a_json_rpc_error_when_its_key_is_revoked",),
    ),
    Mutant(
        "host-login-solved-once-per-stream",
        "api/identity.py",
        "    if bound.host is not None and bound.host_now is not None:\n",
        "    if False:\n",
        HOST_SIGNED_OUT,
    ),
    Mutant(
        "host-login-refusal-is-a-crash-not-an-end",
        "api/identity.py",
        "                if exc.status_code in (401, 403):\n                    return None\n",
        "                if False:\n                    return None\n",
        HOST_SIGNED_OUT,
    ),
    Mutant(
        "inbox-stream-outlives-its-credential",
        "api/inbox.py",
        "                    feed.seen_by(await caller_now(request, feed.caller))\n",
        "                    pass\n",
        INBOX_REVOKED,
    ),
    Mutant(
        "inbox-stream-keeps-old-resources",
        "api/inbox_feed.py",
        "        if caller != self.caller:\n",
        "        if caller.id != self.caller.id:\n",
        INBOX_REVOKED,
    ),
    Mutant(
        "jwks-known-key-waits-for-the-fetch",
        "api/jwks.py",
        "                self._start_fetch()  # in the background: this token is checked with the key held\n"
        "            return found\n",
        "                self._keys = {}\n",
        JWKS_STOPS,
    ),
    Mutant(
        "jwks-fetch-failure-drops-the-keys-held",
        "api/jwks.py",
        "            self._failure = exc\n",
        "            self._failure, self._keys = exc, {}\n",
        JWKS_STOPS,
    ),
    Mutant(
        "jwks-fetch-has-no-overall-deadline",
        "api/jwks.py",
        "            async with asyncio.timeout(self.timeout_s):\n",
        "            async with asyncio.timeout(None):\n",
        (JWKS_DRIP + "[slow]",),
    ),
    Mutant(
        "jwks-answer-read-whole-however-long",
        "api/jwks.py",
        "                if len(body) > MAX_JWKS_BYTES:\n",
        "                if False:\n",
        (JWKS_DRIP + "[fast]",),
    ),
]

DURATIONS = "tests/test_durations.py"
MUTANTS += [
    Mutant(  # NaN, infinity or a date past the year 9999 fails the run half-way, after a paid model turn
        "duration-unbounded",
        "core/vocabulary/seconds.py",
        "    if not number or not math.isfinite(value) or value > MAX_SECONDS:\n",
        "    if not number:\n",
        (DURATIONS,),
    ),
    Mutant(
        "in-doubt-times-unchecked",
        "core/run/settings.py",
        "            check_seconds(getattr(self, name), name, zero=True)\n",
        "            pass\n",
        (DURATIONS,),
    ),
    Mutant(
        "run-durations-unchecked",
        "core/vocabulary/options.py",
        "            if seconds is not None and not is_seconds(seconds):\n",
        "            if False:\n",
        (DURATIONS,),
    ),
    Mutant(  # a run settled elsewhere between the sweep's read and its claim fails the whole sweep
        "expiry-of-a-settled-run-raises",
        "core/run/engine.py",
        "        except _SETTLED_MEANWHILE:\n",
        "        except ():\n",
        (
            "tests/test_expiry.py::"
            "test_a_run_cancelled_while_the_sweep_claims_its_expiry_is_no_error_of_the_sweep",
        ),
    ),
    Mutant(  # a pause due because the run's time ran out is declined instead, and its model goes on
        "max-duration-pause-declined-as-unanswered",
        "core/run/engine.py",
        "            if stored is not None and end is not None and end <= now:\n",
        "            if False:\n",
        (
            "tests/test_expiry.py::"
            "test_a_run_whose_time_ran_out_while_it_waited_is_stopped_on_the_runtimes_clock",
        ),
    ),
    Mutant(  # a tool that catches the cancel and returns takes the run on to its next model turn
        "swallowed-cancel-goes-on",
        "core/run/loop.py",
        "        stop = self.stops.pop(run.state.run_id, None)\n",
        "        stop = None\n",
        ("tests/test_cancel.py::test_a_tool_that_catches_the_cancel_and_returns_does_not_take_the_run_on",),
    ),
    Mutant(  # a tool that catches the cancel of an exhausted time budget takes the run on to a model turn
        "swallowed-budget-goes-on",
        "core/run/loop.py",
        "        if stop is None and budget.expired():\n",
        "        if False:\n",
        ("tests/test_cancel.py::test_a_tool_that_catches_the_cancel_and_returns_does_not_take_the_run_on",),
    ),
    Mutant(  # a tool name no model API takes is accepted, and the provider refuses it at the first run
        "tool-name-rule-unchecked",
        "core/vocabulary/names.py",
        "    if isinstance(name, str) and _NAME.fullmatch(name):\n",
        "    if isinstance(name, str):\n",
        (
            "tests/test_newcomer_errors.py::"
            "test_a_tool_name_no_model_api_takes_is_refused_where_it_is_given_naming_it_and_the_rule",
        ),
    ),
    Mutant(  # "delete_record\n" passes a ``$``-anchored match
        "tool-name-trailing-newline",
        "core/vocabulary/names.py",
        "    if isinstance(name, str) and _NAME.fullmatch(name):\n",
        '    if isinstance(name, str) and re.match(r"^[A-Za-z0-9_-]{1,64}$", name):\n',
        (
            "tests/test_newcomer_errors.py::"
            "test_a_tool_name_no_model_api_takes_is_refused_where_it_is_given_naming_it_and_the_rule",
        ),
    ),
    Mutant(  # MCPStdio(prefix="files.") is accepted and every tool of the server is left out at the first run
        "mcp-prefix-rule-unchecked",
        "core/vocabulary/mcp_servers.py",
        '    if prefix and name_problem(prefix + "_") is not None:\n',
        "    if False:\n",
        (
            "tests/test_newcomer_errors.py::"
            "test_an_mcp_prefix_that_would_leave_every_tool_out_is_refused_when_the_server_is_named",
        ),
    ),
    Mutant(  # Agent("a/b") is accepted and no route reaches it
        "agent-id-rule-unchecked",
        "core/run/agent.py",
        "        problem = name_problem(id)\n",
        "        problem = None\n",
        ("tests/test_newcomer_errors.py::test_an_agent_id_no_route_can_reach_is_refused_naming_the_rule",),
    ),
    Mutant(  # list_suspended_runs(thread_id=5) silently lists nothing
        "suspended-filters-text-unchecked",
        "core/vocabulary/store.py",
        '        text_or_none(thread_id=filters.get("thread_id"), resource_id=filters.get("resource_id"))\n',
        "        pass\n",
        ("tests/test_newcomer_errors.py::test_a_numeric_filter_of_the_suspended_runs_is_an_invalid_option_naming_it",),
    ),
]


def run_tests(tests: tuple[str, ...]) -> tuple[bool, str]:
    """True if the tests all passed (the mutant survived); the last lines of pytest's output."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    # Name the test that caught it (pytest's short summary: "FAILED path::test - reason").
    caught = [line.split()[1] for line in lines if line.startswith("FAILED ")][:1]
    return proc.returncode == 0, " ".join(lines[-1:] + [f"by {c}" for c in caught])


def _fits(mutant: Mutant) -> bool:
    """Its text occurs once, and the code it makes still compiles (a mutant that does not parse breaks
    every test at import and proves nothing)."""
    source = (ROOT / mutant.path).read_text()
    if source.count(mutant.old) != 1:
        return False
    if not mutant.path.endswith(".py"):
        return True
    try:
        compile(source.replace(mutant.old, mutant.new), mutant.path, "exec")
    except SyntaxError:
        return False
    return True


def apply(mutant: Mutant) -> tuple[Path, str]:
    path = ROOT / mutant.path
    original = path.read_text()
    if original.count(mutant.old) != 1:
        found = original.count(mutant.old)
        raise SystemExit(f"mutant {mutant.name}: its text occurs {found} times in {mutant.path}, not once")
    path.write_text(original.replace(mutant.old, mutant.new))
    return path, original


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="run the mutants whose name contains this")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    chosen = [m for m in MUTANTS if args.only is None or args.only in m.name]
    if args.list:  # also says whether each mutant still fits the code; CI runs it (scripts/test.sh)
        stale = [m.name for m in chosen if not _fits(m)]
        for m in chosen:
            print(f"{m.name:36} {m.path:26} {'STALE' if m.name in stale else 'fits'}  {' '.join(m.tests)}")
        if stale:
            stale_names = ", ".join(stale)
            print(
                f"stale mutants (their text is not there once, or breaks the syntax): {stale_names}",
                file=sys.stderr,
            )
            return 1
        return 0
    rows = []
    for mutant in chosen:
        path, original = apply(mutant)
        started = time.monotonic()
        try:
            survived, tail = run_tests(mutant.tests)
        finally:
            path.write_text(original)
        took = time.monotonic() - started
        outcome = verdict(survived, tail)
        print(f"{outcome:8} {mutant.name} ({took:.0f} s): {tail}", flush=True)
        rows.append((mutant, outcome, tail, took))
    unexplained = [m.name for m, outcome, _, _ in rows if outcome == "SURVIVED" and not m.harmless]
    unexplained += [m.name for m, outcome, _, _ in rows if outcome == "BROKEN"]
    if args.only is None:
        REPORT.write_text(report(rows))
        print(f"report: {REPORT.relative_to(ROOT)}")
    if unexplained:
        print(f"surviving or broken mutants without a reason: {', '.join(unexplained)}", file=sys.stderr)
        return 1
    return 0


def verdict(survived: bool, tail: str) -> str:
    """SURVIVED (every test passed), killed (a test failed), or BROKEN: the tests errored out without a
    failure (a mutant that does not import), which proves nothing about them."""
    if survived:
        return "SURVIVED"
    return "killed" if " failed" in tail else "BROKEN"


def report(rows: list[tuple[Mutant, str, str, float]]) -> str:
    """``rows``: each mutant with its verdict, what pytest said and the seconds it took."""
    killed = sum(1 for _, outcome, _, _ in rows if outcome == "killed")
    lines = [
        "# Mutation report",
        "",
        f"Written by `python scripts/mutation.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
        f"{len(rows)} mutants of the guarantees (decisions, claims, checkpoints, recovery, notifications, "
        f"identity, MCP, the benchmark's counters), {killed} killed.",
        "",
        "| mutant | file | tests | result | pytest says |",
        "|---|---|---|---|---|",
    ]
    for mutant, outcome, tail, took in rows:
        result = {"SURVIVED": "**survived**", "BROKEN": "**broken**"}.get(outcome, "killed")
        tests = ", ".join(mutant.tests)
        lines.append(f"| {mutant.name} | `{mutant.path}` | {tests} | {result} ({took:.0f} s) | {tail} |")
    survivors = [m for m, outcome, _, _ in rows if outcome == "SURVIVED"]
    lines += ["", "## Surviving mutants", ""]
    if not survivors:
        lines.append("None.")
    for mutant in survivors:
        reason = mutant.harmless or "NO REASON GIVEN: a test is missing."
        lines.append(f"- `{mutant.name}`: {reason}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
