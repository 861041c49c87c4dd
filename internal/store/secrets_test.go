package store_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/encryption"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

func testKey(t *testing.T, b byte) *encryption.Key {
	t.Helper()
	k, err := encryption.NewKey(bytes.Repeat([]byte{b}, encryption.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSecretsAreSealedInTheirRowsAndTheChangeFeed(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	secrets := s.Secrets(testKey(t, 1))
	const value = "correct-horse-battery-staple-7f3a"
	w, err := secrets.Watch(ctx, store.WatchOptions{Namespace: model.DefaultNamespace})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	sec := &model.Secret{Metadata: model.ObjectMeta{Name: "db", Namespace: model.DefaultNamespace}, StringData: map[string]string{"password": value}}
	model.DefaultSecret(sec)
	if err := secrets.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	got, err := secrets.Get(ctx, model.DefaultNamespace, "db")
	if err != nil || string(got.Data["password"]) != value || got.Type != model.SecretTypeOpaque {
		t.Fatalf("read back %+v, %v", got, err)
	}

	// What PostgreSQL holds, read with SQL: no form of the value.
	var rows []string
	for _, q := range []string{
		"SELECT row_to_json(s)::text FROM secrets s",
		"SELECT row_to_json(c)::text FROM changes c WHERE kind = 'Secret'",
	} {
		var text string
		if err := s.Pool().QueryRow(ctx, q).Scan(&text); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		rows = append(rows, text)
	}
	for _, text := range rows {
		for _, marker := range []string{value, base64.StdEncoding.EncodeToString([]byte(value))} {
			if strings.Contains(text, marker) {
				t.Errorf("the database holds the value in plain text (%q): %s", marker, text)
			}
		}
		if !strings.Contains(text, `"db"`) {
			t.Errorf("the row read is not the secret's: %s", text)
		}
	}

	select {
	case ev := <-w.Events:
		if bytes.Contains(ev.Object, []byte(value)) {
			t.Error("the watch event carries the value in plain text")
		}
		opened, err := secrets.Open(ev.Object)
		if err != nil || string(opened.Data["password"]) != value {
			t.Errorf("opened watch event: %+v, %v", opened, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event for the new secret")
	}

	if _, err := s.Secrets(testKey(t, 2)).Get(ctx, model.DefaultNamespace, "db"); !errors.Is(err, encryption.ErrOpen) {
		t.Errorf("read with another key: %v, want ErrOpen", err)
	}
	if _, err := s.Secrets(nil).Get(ctx, model.DefaultNamespace, "db"); !errors.Is(err, store.ErrNoEncryptionKey) {
		t.Errorf("read without a key: %v, want ErrNoEncryptionKey", err)
	}
	got.Data["password"] = []byte("changed")
	if err := secrets.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	if again, _ := secrets.Get(ctx, model.DefaultNamespace, "db"); string(again.Data["password"]) != "changed" {
		t.Errorf("after update: %+v", again)
	}
}
