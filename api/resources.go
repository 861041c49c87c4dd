package api

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// listOrWatch serves GET on a collection: a page of objects, or with
// ?watch=true a stream of changes.
func listOrWatch[T any, PT store.ObjectPtr[T]](s *Server, c *gin.Context, res store.Resource[T, PT], ns string) {
	if list, ok := listPage(s, c, res, ns); ok {
		respond(c, http.StatusOK, list)
	}
}

// listPage is listOrWatch's page of objects, for a caller that adds to
// them before it answers; ok false: answered already (a watch, an error).
func listPage[T any, PT store.ObjectPtr[T]](s *Server, c *gin.Context, res store.Resource[T, PT], ns string) (*model.List[T], bool) {
	opts, ok := s.listRequest(c, typedWatch[T, PT]{res}, ns)
	if !ok {
		return nil, false
	}
	list, err := res.List(c.Request.Context(), opts)
	if err != nil {
		s.fail(c, err)
		return nil, false
	}
	return list, true
}

// listRequest reads a GET on a collection in ns: a watch it serves itself
// (ok false), a missing namespace or bad parameters it answers (ok false),
// or else the list's options. Every parameter is checked before anything
// waits: a bad selector is a 400 at once, even with a resourceVersion the
// store has yet to reach.
func (s *Server) listRequest(c *gin.Context, w watchable, ns string) (opts store.ListOptions, ok bool) {
	q := c.Request.URL.Query()
	watching := q.Get("watch") == "true" || q.Get("watch") == "1"
	opts = store.ListOptions{Namespace: ns, LabelSelector: q.Get("labelSelector"), FieldSelector: q.Get("fieldSelector")}
	rvText := q.Get("resourceVersion")
	if watching {
		if id := c.GetHeader("Last-Event-ID"); id != "" {
			rvText = id
		}
	} else {
		opts.Continue = q.Get("continue")
		// Kubernetes' "any version": served without holding writers back
		// (store.ListOptions.AnyVersion).
		opts.AnyVersion = rvText == "0"
		if l := q.Get("limit"); l != "" {
			n, err := strconv.ParseInt(l, 10, 64)
			if err != nil || n < 0 {
				s.fail(c, badRequestf("limit %q must be a non-negative integer", l))
				return opts, false
			}
			// Larger pages are cut to MaxListLimit, with a continue token
			// for the rest, as Kubernetes may answer fewer objects than
			// asked for.
			opts.Limit = int(min(n, MaxListLimit))
		}
	}
	initialEvents, err := watchListParams(q, watching)
	if err != nil {
		s.fail(c, err)
		return opts, false
	}
	if err := store.CheckListOptions(opts, w.fieldSelectors()); err != nil {
		s.fail(c, err)
		return opts, false
	}
	rv, err := parseResourceVersion(rvText)
	if err != nil {
		s.fail(c, err)
		return opts, false
	}
	var lasts time.Duration
	if watching {
		if lasts, err = watchTimeout(q, s.minRequestTimeout); err != nil {
			s.fail(c, err)
			return opts, false
		}
	}
	if ns != "" {
		if _, err := s.store.Namespaces().Get(c.Request.Context(), "", ns); err != nil {
			s.fail(c, err)
			return opts, false
		}
	}
	if err := s.awaitResourceVersion(c, rv); err != nil {
		s.fail(c, err)
		return opts, false
	}
	if watching {
		s.watch(c, w, opts, rv, initialEvents, lasts)
		return opts, false
	}
	return opts, true
}

// watchListParams reads Kubernetes' streaming list (sendInitialEvents, as
// client-go's informers ask by default): the objects as of at least the
// resourceVersion, then a bookmark marking their end, then the changes.
// Kubernetes' own rules: only on a watch, with resourceVersionMatch
// NotOlderThan and bookmarks allowed.
func watchListParams(q url.Values, watching bool) (initialEvents bool, err error) {
	send, match := q.Get("sendInitialEvents"), q.Get("resourceVersionMatch")
	if send == "" {
		if match != "" && watching {
			return false, badRequestf("resourceVersionMatch is forbidden for watch unless sendInitialEvents is given")
		}
		return false, nil
	}
	initialEvents, perr := strconv.ParseBool(send)
	switch {
	case perr != nil:
		return false, badRequestf("sendInitialEvents %q must be true or false", send)
	case !watching:
		return false, badRequestf("sendInitialEvents is forbidden for list")
	case match != "NotOlderThan":
		return false, badRequestf("sendInitialEvents requires resourceVersionMatch NotOlderThan, not %q", match)
	case initialEvents && q.Get("allowWatchBookmarks") != "true":
		return false, badRequestf("sendInitialEvents requires allowWatchBookmarks=true: the end of the initial events is a bookmark")
	}
	return initialEvents, nil
}

// MaxListLimit is the largest page a list answers: a larger ?limit= gets
// this many objects and a continue token.
const MaxListLimit = 1000

func getOne[T any, PT store.ObjectPtr[T]](s *Server, c *gin.Context, res store.Resource[T, PT], ns, name string) {
	obj, err := res.Get(c.Request.Context(), ns, name)
	if err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, obj)
}

// checkTypeMeta refuses a body that names another kind or version.
func checkTypeMeta(tm *model.TypeMeta, kind string) error {
	return checkGroupTypeMeta(tm, kind, model.APIVersion)
}

// checkGroupTypeMeta refuses a body that names another kind or version,
// and fills in what it left out.
func checkGroupTypeMeta(tm *model.TypeMeta, kind, version string) error {
	if tm.Kind != "" && tm.Kind != kind {
		return badRequestf("body has kind %q; this endpoint takes %q", tm.Kind, kind)
	}
	if tm.APIVersion != "" && tm.APIVersion != version {
		return badRequestf("body has apiVersion %q; this endpoint serves %q", tm.APIVersion, version)
	}
	tm.Kind, tm.APIVersion = kind, version
	return nil
}

// systemMeta clears metadata only the server may set.
func systemMeta(m *model.ObjectMeta) {
	m.UID, m.ResourceVersion, m.CreationTimestamp, m.DeletionTimestamp, m.DeletionGracePeriodSeconds = "", "", nil, nil, nil
}

func (s *Server) listNamespaces(c *gin.Context) { listOrWatch(s, c, s.store.Namespaces(), "") }
func (s *Server) getNamespace(c *gin.Context) {
	getOne(s, c, s.store.Namespaces(), "", c.Param("ns"))
}

func (s *Server) createNamespace(c *gin.Context) {
	var ns model.Namespace
	if err := decode(c, &ns); err != nil {
		s.fail(c, err)
		return
	}
	if err := checkTypeMeta(&ns.TypeMeta, model.KindNamespace); err != nil {
		s.fail(c, err)
		return
	}
	systemMeta(&ns.Metadata)
	model.DefaultNamespaceObject(&ns)
	if errs := model.ValidateNamespace(&ns); len(errs) > 0 {
		s.fail(c, invalid(model.KindNamespace, ns.Metadata.Name, errs))
		return
	}
	if err := s.store.Namespaces().Create(c.Request.Context(), &ns); err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusCreated, &ns)
}

func (s *Server) deleteNamespace(c *gin.Context) {
	ns, err := s.store.DeleteNamespace(c.Request.Context(), c.Param("ns"), c.Query("resourceVersion"))
	if err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, ns)
}

func (s *Server) listEvents(c *gin.Context) { listOrWatch(s, c, s.store.Events(), c.Param("ns")) }
