-- +goose Up
-- The node certificates the control plane signed at joins, by serial:
-- deleting a Node revokes them (in the same transaction, whatever path
-- deletes it), so a deleted node's certificate neither registers it
-- again nor reaches its Temporal task queue.
CREATE TABLE node_certificates (
    serial     text PRIMARY KEY,
    node       text NOT NULL,
    not_after  timestamptz NOT NULL,
    issued_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
CREATE INDEX node_certificates_node ON node_certificates (node);

-- +goose StatementBegin
CREATE FUNCTION revoke_node_certificates() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE node_certificates SET revoked_at = now() WHERE node = OLD.name AND revoked_at IS NULL;
    RETURN OLD;
END $$;
-- +goose StatementEnd
CREATE TRIGGER nodes_revoke_certificates AFTER DELETE ON nodes
    FOR EACH ROW EXECUTE FUNCTION revoke_node_certificates();

-- +goose Down
DROP TRIGGER nodes_revoke_certificates ON nodes;
DROP FUNCTION revoke_node_certificates();
DROP TABLE node_certificates;
