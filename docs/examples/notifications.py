from troupe import Agent, ApproverPolicy, LinkSigner, Notifications, NotificationTarget, Runtime, SqliteStore
from troupe.testing import ScriptedModel, text

ops = Agent("ops", model=ScriptedModel([text("Nothing to do.")]))  # your agent, with its gated tools
# Yours: whsec_ + base64 of 16+ random bytes each; the links' key is never a webhook's secret.
secret = "whsec_ZXhhbXBsZSBzaWduaW5nIGtleSwgMzIgYnl0ZXMhIQ=="
link_secret = "whsec_bGlua3MnIG93biBrZXksIDMyIGJ5dGVzIGxvbmch"

runtime = Runtime(
    [ops],
    storage=SqliteStore("troupe.db"),
    notifications=Notifications(
        (
            NotificationTarget(
                "https://hooks.example/abc", secret, name="ops-chat", format="chat", agents={"ops"}
            ),
        ),  # filters: agents, tools, resources
        links=LinkSigner("https://troupe.example.com", link_secret),  # Approve/Decline links in events
    ),
    approver_policies=[
        ApproverPolicy(tool="delete_record", roles={"dba"}, separation_of_duties=True, quorum=2)
    ],
)
print([target.name for target in runtime.notifications.targets])  # nothing is sent until a run pauses
