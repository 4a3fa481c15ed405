#include "common/process/grpc_security.h"

#include <string_view>

#include "grpcpp/security/credentials.h"

namespace pagoda {

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TlsPem& pem) {
  if (pem.cert.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      pem.ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                     : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = pem.ca;
  options.pem_key_cert_pairs.push_back({pem.key, pem.cert});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(bool tls, const TlsPem& pem) {
  if (!tls) return grpc::InsecureChannelCredentials();
  return grpc::SslCredentials(
      {.pem_root_certs = pem.ca, .pem_private_key = pem.key, .pem_cert_chain = pem.cert});
}

void AddBearerToken(const std::string& token, grpc::ClientContext* context) {
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
}

bool CallCarriesToken(const grpc::ServerContextBase& context, const std::string& token) {
  if (token.empty()) return true;
  const auto& metadata = context.client_metadata();
  auto auth = metadata.find("authorization");
  return auth != metadata.end() &&
         BearerMatches(std::string_view(auth->second.data(), auth->second.size()), token);
}

}  // namespace pagoda
