package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/encryption"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// redactSecret is the one place secrets' values leave the API: every
// response and watch event carrying a secret passes through it. A caller
// who may not see values (Config.MaySeeSecretValues) gets the keys with
// empty values.
func (s *Server) redactSecret(c *gin.Context, sec *model.Secret) *model.Secret {
	sec.StringData = nil
	if !s.maySeeSecretValues(c) {
		model.RedactSecret(sec)
	}
	return sec
}

// secretError gives a server without a key, or with the wrong one, a
// status that says so without the details.
func (s *Server) secretError(c *gin.Context, err error) error {
	switch {
	case errors.Is(err, store.ErrNoEncryptionKey):
		return &apiError{code: http.StatusServiceUnavailable, reason: "ServiceUnavailable", msg: err.Error()}
	case errors.Is(err, encryption.ErrOpen):
		s.log.Error("a stored secret does not open with this server's encryption key", "path", c.Request.URL.Path, "err", err)
		return &apiError{code: http.StatusInternalServerError, reason: "InternalError",
			msg: "a stored secret does not open with this server's encryption key (--encryption-key-file); it has been logged"}
	}
	return err
}

func (s *Server) listSecrets(c *gin.Context) {
	opts, ok := s.listRequest(c, secretWatch{s}, c.Param("ns"))
	if !ok {
		return
	}
	list, err := s.secrets.List(c.Request.Context(), opts)
	if err != nil {
		s.fail(c, s.secretError(c, err))
		return
	}
	for i := range list.Items {
		s.redactSecret(c, &list.Items[i])
	}
	respond(c, http.StatusOK, list)
}

func (s *Server) getSecret(c *gin.Context) {
	sec, err := s.secrets.Get(c.Request.Context(), c.Param("ns"), c.Param("name"))
	if err != nil {
		s.fail(c, s.secretError(c, err))
		return
	}
	respond(c, http.StatusOK, s.redactSecret(c, sec))
}

// decodeSecret reads a secret body addressed to namespace ns, with its
// stringData merged into data.
func decodeSecret(c *gin.Context, ns string) (*model.Secret, error) {
	var sec model.Secret
	if err := decode(c, &sec); err != nil {
		return nil, err
	}
	if err := checkTypeMeta(&sec.TypeMeta, model.KindSecret); err != nil {
		return nil, err
	}
	if sec.Metadata.Namespace != "" && sec.Metadata.Namespace != ns {
		return nil, badRequestf("the namespace of the object (%q) does not match the namespace of the request (%q)", sec.Metadata.Namespace, ns)
	}
	sec.Metadata.Namespace = ns
	model.DefaultSecret(&sec)
	return &sec, nil
}

func (s *Server) createSecret(c *gin.Context) {
	sec, err := decodeSecret(c, c.Param("ns"))
	if err != nil {
		s.fail(c, err)
		return
	}
	systemMeta(&sec.Metadata)
	if errs := model.ValidateSecret(sec); len(errs) > 0 {
		s.fail(c, invalid(model.KindSecret, sec.Metadata.Name, errs))
		return
	}
	if err := s.recordCreate(c, sec); err != nil {
		s.fail(c, err)
		return
	}
	if err := s.secrets.Create(c.Request.Context(), sec); err != nil {
		s.fail(c, s.secretError(c, err))
		return
	}
	respond(c, http.StatusCreated, s.redactSecret(c, sec))
}

// updateSecret replaces a secret's labels, annotations, data and
// immutability at the resourceVersion the client read; a caller who may
// not see values keeps those it sends redacted (keepRedactedValues).
func (s *Server) updateSecret(c *gin.Context) {
	ns, name := c.Param("ns"), c.Param("name")
	sec, err := decodeSecret(c, ns)
	if err != nil {
		s.fail(c, err)
		return
	}
	if sec.Metadata.Name != "" && sec.Metadata.Name != name {
		s.fail(c, badRequestf("the name of the object (%q) does not match the name in the URL (%q)", sec.Metadata.Name, name))
		return
	}
	sec.Metadata.Name = name
	cur, err := s.secrets.Get(c.Request.Context(), ns, name)
	if err != nil {
		s.fail(c, s.secretError(c, err))
		return
	}
	if !s.maySeeSecretValues(c) {
		keepRedactedValues(sec, cur)
	}
	var errs model.FieldErrors
	if sec.Metadata.ResourceVersion == "" {
		errs = append(errs, model.FieldError{Field: "metadata.resourceVersion", Type: model.FieldRequired,
			Detail: "Required value: an update must say which version it replaces; GET the secret first"})
	}
	errs = append(errs, model.ValidateSecretUpdate(sec, cur)...)
	if len(errs) > 0 {
		s.fail(c, invalid(model.KindSecret, name, errs))
		return
	}
	if err := s.takeUserMeta(c, cur, sec); err != nil {
		s.fail(c, err)
		return
	}
	cur.Data, cur.Immutable = sec.Data, sec.Immutable
	cur.Metadata.ResourceVersion = sec.Metadata.ResourceVersion
	if err := s.secrets.Update(c.Request.Context(), cur); err != nil {
		s.fail(c, s.secretError(c, err))
		return
	}
	respond(c, http.StatusOK, s.redactSecret(c, cur))
}

// keepRedactedValues makes a GET then PUT round trip safe for a caller
// who sees keys without values: a key it sends with an empty value (as
// its GET showed it) keeps the stored value, where writing the empty
// value back would wipe the secret. Such a caller removes a key by
// leaving it out and cannot set a stored key to the empty value.
func keepRedactedValues(sec, cur *model.Secret) {
	for k, v := range sec.Data {
		if stored, ok := cur.Data[k]; ok && len(v) == 0 {
			sec.Data[k] = stored
		}
	}
}

func (s *Server) deleteSecret(c *gin.Context) {
	sec, err := s.secrets.Delete(c.Request.Context(), c.Param("ns"), c.Param("name"), c.Query("resourceVersion"))
	if err != nil {
		s.fail(c, s.secretError(c, err))
		return
	}
	respond(c, http.StatusOK, s.redactSecret(c, sec))
}

// secretWatch serves watches of secrets: the feed carries them sealed;
// each is opened and redacted for the caller.
type secretWatch struct{ s *Server }

func (w secretWatch) fieldSelectors() map[string]string { return w.s.secrets.FieldSelectors() }

func (w secretWatch) snapshot(c *gin.Context, o store.ListOptions) ([]initialObject, int64, error) {
	list, err := w.s.secrets.List(c.Request.Context(), o)
	if err != nil {
		return nil, 0, w.s.secretError(c, err)
	}
	rv, _ := strconv.ParseInt(list.Metadata.ResourceVersion, 10, 64)
	out := make([]initialObject, 0, len(list.Items))
	for i := range list.Items {
		b, err := json.Marshal(w.s.redactSecret(c, &list.Items[i]))
		if err != nil {
			return nil, 0, err
		}
		out = append(out, initialObject{b})
	}
	return out, rv, nil
}

func (w secretWatch) watch(c *gin.Context, o store.WatchOptions) (*store.Watch, error) {
	watch, err := w.s.secrets.Watch(c.Request.Context(), o)
	return watch, w.s.secretError(c, err)
}

func (w secretWatch) present(c *gin.Context, object json.RawMessage) (json.RawMessage, error) {
	sec, err := w.s.secrets.Open(object)
	if err != nil {
		return nil, err
	}
	return json.Marshal(w.s.redactSecret(c, sec))
}
