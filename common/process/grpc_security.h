// The cluster's secret and certificates as gRPC sees them, for every port where Pagoda's
// processes talk to each other (the router's worker port, the workers' KV transfer port): the
// credentials a server listens with and a client dials with, from one TlsPem, and the bearer
// token a call carries. The one place of common/ that includes gRPC (tests/layering_test.sh).
#ifndef PAGODA_COMMON_PROCESS_GRPC_SECURITY_H_
#define PAGODA_COMMON_PROCESS_GRPC_SECURITY_H_

#include <memory>
#include <string>

#include "common/process/secret.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_context.h"

namespace pagoda {

// TLS with pem.cert / pem.key when a certificate is given, requiring and verifying a client
// certificate signed by pem.ca when a CA is given too (mTLS); plaintext otherwise.
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TlsPem& pem);

// TLS when `tls` (roots: pem.ca, else the system's), presenting pem.cert / pem.key as a client
// certificate when given; plaintext otherwise.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(bool tls, const TlsPem& pem);

// Adds "authorization: Bearer <token>" to a call; nothing when the token is "".
void AddBearerToken(const std::string& token, grpc::ClientContext* context);

// Whether a call may go on: true when no token is set, else when its "authorization" metadata
// carries the token (BearerMatches: constant time).
bool CallCarriesToken(const grpc::ServerContextBase& context, const std::string& token);

}  // namespace pagoda

#endif  // PAGODA_COMMON_PROCESS_GRPC_SECURITY_H_
