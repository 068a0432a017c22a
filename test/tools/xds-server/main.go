// Command xds-server is sluice's test xDS management server: go-control-plane's ADS server and
// snapshot cache serving ratelimit.config.ratelimit.v3.RateLimitConfig resources, the way the
// reference's integration tests and Envoy Gateway serve them. Tests control it over a small HTTP
// port on loopback:
//
//	PUT /snapshot   body: {"version": "2", "resources": [RateLimitConfig as JSON, ...]}
//	                sets the snapshot of the node id given by -node-id
//	GET /requests   every DiscoveryRequest received so far, as JSON (node, version, nonce,
//	                error_detail, the stream's gRPC metadata)
//	GET /handshake-failures  how many TLS handshakes failed (a number)
//
// It prints one JSON line {"grpc_port": N, "control_port": M} on stdout once both listen.
//
// With -descriptor it prints the FileDescriptorProto of the rls_conf.proto it was built with (as
// JSON) and exits, so the contract tier can compare sluice's proto with it.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/known/structpb"
)

// snapshotJSON is what PUT /snapshot and -snapshot take.
type snapshotJSON struct {
	Version   string       `json:"version"`
	Resources []configJSON `json:"resources"`
}

type configJSON struct {
	Name        string           `json:"name"`
	Domain      string           `json:"domain"`
	Descriptors []descriptorJSON `json:"descriptors"`
}

type descriptorJSON struct {
	Key            string           `json:"key"`
	Value          string           `json:"value"`
	RateLimit      *policyJSON      `json:"rate_limit"`
	Descriptors    []descriptorJSON `json:"descriptors"`
	ShadowMode     bool             `json:"shadow_mode"`
	DetailedMetric bool             `json:"detailed_metric"`
	QuotaMode      bool             `json:"quota_mode"`
	Metadata       map[string]any   `json:"metadata"`
}

type policyJSON struct {
	// Unit is a RateLimitUnit name (SECOND ... YEAR, WEEK) or its number as a string.
	Unit            string `json:"unit"`
	RequestsPerUnit uint32 `json:"requests_per_unit"`
	Unlimited       bool   `json:"unlimited"`
	Name            string `json:"name"`
	Replaces        []struct {
		Name string `json:"name"`
	} `json:"replaces"`
}

// The unit numbers of the reference's rls_conf.proto; go-control-plane/ratelimit v0.1.0's enum
// stops at DAY, but an enum field carries any number on the wire.
var unitNumbers = map[string]int32{
	"UNKNOWN": 0, "SECOND": 1, "MINUTE": 2, "HOUR": 3, "DAY": 4, "MONTH": 5, "YEAR": 6, "WEEK": 7,
}

// Field numbers the reference's rls_conf.proto has and go-control-plane/ratelimit v0.1.0 lacks;
// they are written as unknown fields, which Go's protobuf runtime keeps when marshalling.
const (
	quotaModeField = 7
	metadataField  = 8
)

func toConfig(c configJSON) (*rlsconf.RateLimitConfig, error) {
	descriptors, err := toDescriptors(c.Descriptors)
	if err != nil {
		return nil, err
	}
	return &rlsconf.RateLimitConfig{Name: c.Name, Domain: c.Domain, Descriptors: descriptors}, nil
}

func toDescriptors(in []descriptorJSON) ([]*rlsconf.RateLimitDescriptor, error) {
	out := make([]*rlsconf.RateLimitDescriptor, 0, len(in))
	for _, d := range in {
		children, err := toDescriptors(d.Descriptors)
		if err != nil {
			return nil, err
		}
		pb := &rlsconf.RateLimitDescriptor{
			Key:            d.Key,
			Value:          d.Value,
			Descriptors:    children,
			ShadowMode:     d.ShadowMode,
			DetailedMetric: d.DetailedMetric,
		}
		if d.RateLimit != nil {
			unit, ok := unitNumbers[strings.ToUpper(d.RateLimit.Unit)]
			if !ok {
				var n int32
				if _, err := fmt.Sscanf(d.RateLimit.Unit, "%d", &n); err != nil {
					return nil, fmt.Errorf("unit %q: not a RateLimitUnit name or number", d.RateLimit.Unit)
				}
				unit = n
			}
			policy := &rlsconf.RateLimitPolicy{
				Unit:            rlsconf.RateLimitUnit(unit),
				RequestsPerUnit: d.RateLimit.RequestsPerUnit,
				Unlimited:       d.RateLimit.Unlimited,
				Name:            d.RateLimit.Name,
			}
			for _, r := range d.RateLimit.Replaces {
				policy.Replaces = append(policy.Replaces, &rlsconf.RateLimitReplace{Name: r.Name})
			}
			pb.RateLimit = policy
		}
		var unknown []byte
		if d.QuotaMode {
			unknown = protowire.AppendTag(unknown, quotaModeField, protowire.VarintType)
			unknown = protowire.AppendVarint(unknown, 1)
		}
		if d.Metadata != nil {
			s, err := structpb.NewStruct(d.Metadata)
			if err != nil {
				return nil, fmt.Errorf("metadata: %w", err)
			}
			b, err := proto.Marshal(s)
			if err != nil {
				return nil, err
			}
			unknown = protowire.AppendTag(unknown, metadataField, protowire.BytesType)
			unknown = protowire.AppendBytes(unknown, b)
		}
		if len(unknown) > 0 {
			pb.ProtoReflect().SetUnknown(unknown)
		}
		out = append(out, pb)
	}
	return out, nil
}

func toSnapshot(s snapshotJSON) (*cache.Snapshot, error) {
	resources := make([]types.Resource, 0, len(s.Resources))
	for _, c := range s.Resources {
		pb, err := toConfig(c)
		if err != nil {
			return nil, err
		}
		resources = append(resources, pb)
	}
	return cache.NewSnapshot(s.Version, map[resource.Type][]types.Resource{
		resource.RateLimitConfigType: resources,
	})
}

// requestRecord is one DiscoveryRequest as GET /requests reports it.
type requestRecord struct {
	Stream        int64             `json:"stream"`
	NodeID        string            `json:"node_id"`
	NodeMetadata  map[string]any    `json:"node_metadata"`
	UserAgentName string            `json:"user_agent_name"`
	TypeURL       string            `json:"type_url"`
	VersionInfo   string            `json:"version_info"`
	ResponseNonce string            `json:"response_nonce"`
	ErrorDetail   *errorDetail      `json:"error_detail"`
	Headers       map[string]string `json:"headers"`
}

type errorDetail struct {
	Code    int32  `json:"code"`
	Message string `json:"message"`
}

type recorder struct {
	mu       sync.Mutex
	requests []requestRecord
	headers  map[int64]map[string]string
}

func (r *recorder) open(ctx context.Context, stream int64, _ string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	headers := map[string]string{}
	for k, v := range md {
		headers[k] = strings.Join(v, ",")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.headers[stream] = headers
	return nil
}

func (r *recorder) request(stream int64, req *discoverygrpc.DiscoveryRequest) error {
	rec := requestRecord{
		Stream:        stream,
		TypeURL:       req.GetTypeUrl(),
		VersionInfo:   req.GetVersionInfo(),
		ResponseNonce: req.GetResponseNonce(),
	}
	if node := req.GetNode(); node != nil {
		rec.NodeID = node.GetId()
		rec.NodeMetadata = node.GetMetadata().AsMap()
		rec.UserAgentName = node.GetUserAgentName()
	}
	if e := req.GetErrorDetail(); e != nil {
		rec.ErrorDetail = &errorDetail{Code: e.GetCode(), Message: e.GetMessage()}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rec.Headers = r.headers[stream]
	r.requests = append(r.requests, rec)
	return nil
}

func (r *recorder) list() []requestRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]requestRecord(nil), r.requests...)
}

func serverCredentials(certFile, keyFile, clientCAFile string) (grpc.ServerOption, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	config := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificate in %s", clientCAFile)
		}
		config.ClientCAs = pool
		config.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return grpc.Creds(&countingCreds{TransportCredentials: credentials.NewTLS(config)}), nil
}

// handshakeFailures counts refused TLS handshakes (GET /handshake-failures), so a test can wait
// for a client to have been refused instead of sleeping.
var handshakeFailures atomic.Int64

// countingCreds counts the server handshakes that fail.
type countingCreds struct {
	credentials.TransportCredentials
}

func (c *countingCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		handshakeFailures.Add(1)
		log.Printf("TLS handshake failed: %v", err)
	}
	return out, info, err
}

func main() {
	grpcAddr := flag.String("grpc-addr", "127.0.0.1:0", "ADS listen address")
	controlAddr := flag.String("control-addr", "127.0.0.1:0", "control HTTP listen address")
	nodeID := flag.String("node-id", "default", "node id whose snapshot PUT /snapshot sets")
	snapshotFile := flag.String("snapshot", "", "initial snapshot (JSON file); none: no snapshot")
	certFile := flag.String("tls-cert", "", "server certificate (PEM); empty: plaintext")
	keyFile := flag.String("tls-key", "", "server key (PEM)")
	clientCA := flag.String("client-ca", "", "CA client certificates must chain to; empty: no client certificate asked")
	descriptor := flag.Bool("descriptor", false, "print rls_conf.proto's FileDescriptorProto as JSON and exit")
	flag.Parse()

	if *descriptor {
		fd := protodesc.ToFileDescriptorProto(rlsconf.File_ratelimit_config_ratelimit_v3_rls_conf_proto)
		b, err := protojson.Marshal(fd)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(b))
		return
	}

	ctx := context.Background()
	snapshots := cache.NewSnapshotCache(true, cache.IDHash{}, nil)
	if *snapshotFile != "" {
		b, err := os.ReadFile(*snapshotFile)
		if err != nil {
			log.Fatal(err)
		}
		var s snapshotJSON
		if err := json.Unmarshal(b, &s); err != nil {
			log.Fatalf("%s: %v", *snapshotFile, err)
		}
		snap, err := toSnapshot(s)
		if err != nil {
			log.Fatalf("%s: %v", *snapshotFile, err)
		}
		if err := snapshots.SetSnapshot(ctx, *nodeID, snap); err != nil {
			log.Fatal(err)
		}
	}

	rec := &recorder{headers: map[int64]map[string]string{}}
	callbacks := server.CallbackFuncs{StreamOpenFunc: rec.open, StreamRequestFunc: rec.request}
	xds := server.NewServer(ctx, snapshots, callbacks)

	var options []grpc.ServerOption
	if *certFile != "" {
		creds, err := serverCredentials(*certFile, *keyFile, *clientCA)
		if err != nil {
			log.Fatal(err)
		}
		options = append(options, creds)
	}
	grpcServer := grpc.NewServer(options...)
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(grpcServer, xds)
	grpcListener, err := net.Listen("tcp", *grpcAddr)
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/snapshot", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut && r.Method != http.MethodPost {
			http.Error(w, "PUT a snapshot", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var s snapshotJSON
		if err := json.Unmarshal(body, &s); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		snap, err := toSnapshot(s)
		if err == nil {
			err = snapshots.SetSnapshot(r.Context(), *nodeID, snap)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/handshake-failures", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "%d", handshakeFailures.Load())
	})
	mux.HandleFunc("/requests", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(rec.list())
	})
	controlListener, err := net.Listen("tcp", *controlAddr)
	if err != nil {
		log.Fatal(err)
	}

	go func() { log.Fatal(http.Serve(controlListener, mux)) }()
	ready, _ := json.Marshal(map[string]int{
		"grpc_port":    grpcListener.Addr().(*net.TCPAddr).Port,
		"control_port": controlListener.Addr().(*net.TCPAddr).Port,
	})
	fmt.Println(string(ready))
	if err := grpcServer.Serve(grpcListener); err != nil {
		log.Fatal(err)
	}
}
