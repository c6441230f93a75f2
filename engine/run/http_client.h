// A tiny blocking HTTP/1.1 client over POSIX sockets, enough to ask a cloud metadata server
// (EC2's IMDSv2, GCP's metadata server) whether the machine is about to be taken away. Plain
// http:// only (metadata servers are link-local and unencrypted), one request per connection
// (Connection: close), Content-Length or chunked bodies. No dependency beyond libc.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace lathe {

struct HttpResponse {
  int status = 0;  ///< e.g. 200, 404
  std::string body;
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

/// Sends `method` `url` ("http://host[:port]/path") with `headers` and `body` and waits at most
/// `timeout_s` for each of connect, send and receive. Throws lathe::Error naming the URL when the
/// URL is not plain http, the host does not resolve, the connection fails or times out, or the
/// reply is not HTTP.
HttpResponse http_request(const std::string& method, const std::string& url, const HttpHeaders& headers = {},
                          const std::string& body = "", double timeout_s = 2.0);

}  // namespace lathe
