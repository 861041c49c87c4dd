package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/internal/encryption"
	"github.com/zonewright/zonewright/internal/model"
)

var secretKind = &kindInfo{kind: model.KindSecret, table: "secrets", namespaced: true,
	fields: map[string]string{"metadata.name": "name", "metadata.namespace": "namespace"}}

// ErrNoEncryptionKey is a secret read or written by a server started
// without an encryption key.
var ErrNoEncryptionKey = errors.New("this server has no encryption key (--encryption-key-file), so it keeps no secrets")

// sealedSecret is a secret as stored: its data sealed with the key, bound
// to the secret's namespace and name. Rows and change-feed entries hold
// only this form.
type sealedSecret struct {
	model.TypeMeta `json:",inline"`
	Metadata       model.ObjectMeta `json:"metadata"`
	Spec           sealedSecretSpec `json:"spec"`
	Status         struct{}         `json:"status"`
}

type sealedSecretSpec struct {
	Type      string `json:"type,omitempty"`
	Immutable *bool  `json:"immutable,omitempty"`
	// Data is the secret's data map, JSON-encoded, then sealed.
	Data []byte `json:"data,omitempty"`
}

func (s *sealedSecret) GetTypeMeta() *model.TypeMeta { return &s.TypeMeta }
func (s *sealedSecret) GetMeta() *model.ObjectMeta   { return &s.Metadata }
func (s *sealedSecret) Parts() (spec, status any)    { return &s.Spec, &s.Status }

// Secrets is access to secrets, sealing their data on the way in and
// opening it on the way out.
type Secrets struct {
	res Resource[sealedSecret, *sealedSecret]
	key *encryption.Key
}

// Secrets gives access to secrets with the control plane's key; with a
// nil key every call fails with ErrNoEncryptionKey.
func (s *Store) Secrets(key *encryption.Key) Secrets {
	return Secrets{res: Resource[sealedSecret, *sealedSecret]{s, secretKind}, key: key}
}

// aad binds a sealed value to the secret it belongs to.
func secretAAD(m *model.ObjectMeta) []byte { return []byte(m.Namespace + "/" + m.Name) }

func (s Secrets) seal(sec *model.Secret) (*sealedSecret, error) {
	if s.key == nil {
		return nil, ErrNoEncryptionKey
	}
	data := sec.Data
	if data == nil {
		data = map[string][]byte{}
	}
	plain, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	return &sealedSecret{Metadata: sec.Metadata,
		Spec: sealedSecretSpec{Type: sec.Type, Immutable: sec.Immutable, Data: s.key.Seal(plain, secretAAD(&sec.Metadata))}}, nil
}

func (s Secrets) open(st *sealedSecret) (*model.Secret, error) {
	if s.key == nil {
		return nil, ErrNoEncryptionKey
	}
	sec := &model.Secret{TypeMeta: model.TypeMeta{APIVersion: model.APIVersion, Kind: model.KindSecret},
		Metadata: st.Metadata, Type: st.Spec.Type, Immutable: st.Spec.Immutable}
	plain, err := s.key.Open(st.Spec.Data, secretAAD(&st.Metadata))
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", st.Metadata.Namespace, st.Metadata.Name, err)
	}
	if err := json.Unmarshal(plain, &sec.Data); err != nil {
		return nil, fmt.Errorf("secret %s/%s: decode its data: %w", st.Metadata.Namespace, st.Metadata.Name, err)
	}
	return sec, nil
}

// Open turns a watch event's object (the stored form) into the secret.
func (s Secrets) Open(raw json.RawMessage) (*model.Secret, error) {
	var st sealedSecret
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("decode a secret's change: %w", err)
	}
	return s.open(&st)
}

// FieldSelectors lists the field selectors secrets support.
func (s Secrets) FieldSelectors() map[string]string { return secretKind.fields }

// Get reads one secret.
func (s Secrets) Get(ctx context.Context, ns, name string) (*model.Secret, error) {
	if s.key == nil {
		return nil, ErrNoEncryptionKey
	}
	st, err := s.res.Get(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	return s.open(st)
}

// List reads a page of secrets (see Resource.List).
func (s Secrets) List(ctx context.Context, o ListOptions) (*model.List[model.Secret], error) {
	if s.key == nil {
		return nil, ErrNoEncryptionKey
	}
	page, err := s.res.List(ctx, o)
	if err != nil {
		return nil, err
	}
	list := &model.List[model.Secret]{TypeMeta: page.TypeMeta, Metadata: page.Metadata, Items: make([]model.Secret, 0, len(page.Items))}
	for i := range page.Items {
		sec, err := s.open(&page.Items[i])
		if err != nil {
			return nil, err
		}
		list.Items = append(list.Items, *sec)
	}
	return list, nil
}

// Create stores a new secret; sec gets its uid, version and timestamps.
func (s Secrets) Create(ctx context.Context, sec *model.Secret) error {
	st, err := s.seal(sec)
	if err != nil {
		return err
	}
	err = s.res.CreateWith(ctx, st, func(tx pgx.Tx) error {
		return admitQuota(ctx, tx, sec.Metadata.Namespace, fmt.Sprintf("secrets %q", sec.Metadata.Name), model.Usage{model.QuotaSecrets: 1000}, nil)
	})
	if err != nil {
		return err
	}
	sec.Metadata = st.Metadata
	return nil
}

// Update replaces a secret at the resourceVersion it carries.
func (s Secrets) Update(ctx context.Context, sec *model.Secret) error {
	st, err := s.seal(sec)
	if err != nil {
		return err
	}
	if err := s.res.Update(ctx, st); err != nil {
		return err
	}
	sec.Metadata = st.Metadata
	return nil
}

// Delete removes a secret; a non-empty resourceVersion is a precondition.
func (s Secrets) Delete(ctx context.Context, ns, name, resourceVersion string) (*model.Secret, error) {
	if s.key == nil {
		return nil, ErrNoEncryptionKey
	}
	st, err := s.res.Delete(ctx, ns, name, resourceVersion)
	if err != nil {
		return nil, err
	}
	return s.open(st)
}

// Watch streams changes of secrets in their stored form; Open each
// event's object.
func (s Secrets) Watch(ctx context.Context, o WatchOptions) (*Watch, error) {
	if s.key == nil {
		return nil, ErrNoEncryptionKey
	}
	return s.res.Watch(ctx, o)
}

// CountSecrets counts the secrets stored, in every namespace.
func (s *Store) CountSecrets(ctx context.Context) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM secrets").Scan(&n); err != nil {
		return 0, classify(err)
	}
	return n, nil
}
