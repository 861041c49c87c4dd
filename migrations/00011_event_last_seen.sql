-- +goose Up
-- Events are aggregated: a repeated event bumps the count and
-- lastTimestamp of one row instead of adding rows, so an event expires by
-- when it was last seen, not created. last_seen mirrors the event's
-- lastTimestamp (the store sets both when it records an event) so that
-- expiry is an index range scan rather than a cast of every row's spec.
ALTER TABLE events ADD COLUMN last_seen timestamptz NOT NULL DEFAULT now();
UPDATE events SET last_seen = created_at;
CREATE INDEX events_last_seen ON events (last_seen);
DROP INDEX events_created_at;
-- An object's similar events (other messages, same reason) are counted
-- before one is recorded, to combine them past a threshold.
CREATE INDEX events_involved_object ON events (namespace, (spec -> 'involvedObject' ->> 'name'), (spec ->> 'reason'));

-- +goose Down
DROP INDEX events_involved_object;
CREATE INDEX events_created_at ON events (created_at);
ALTER TABLE events DROP COLUMN last_seen;
