"""Notifying people: events in a durable outbox written with the state they report, their delivery as
signed webhooks through a sender the host plugs in, and signed decision links."""
