-- +goose Up
-- A node's pull of an image: the bytes the control plane has sent it and
-- the total, written by the download's handler at most once a second.
ALTER TABLE image_node_status
    ADD COLUMN bytes_done  bigint NOT NULL DEFAULT 0,
    ADD COLUMN bytes_total bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE image_node_status DROP COLUMN bytes_done, DROP COLUMN bytes_total;
