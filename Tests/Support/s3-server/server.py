"""A real S3 API server for the tests: moto's server (the same WSGI app as `moto_server`) on 127.0.0.1 only,
with a thin layer that logs each S3 request and can inject faults.

    .venv-s3/bin/python Tests/Support/s3-server/server.py --bucket NAME [--port 0] [--min-part-size N] [--auth]

Prints one line, ``READY <port>``, once it accepts connections. The bucket exists from the start.

--min-part-size N   S3_UPLOAD_PART_MIN_SIZE for moto (default S3's 5 MiB), so tests can use many small parts.
--verify-checksums  like S3, a PutObject or UploadPart whose x-amz-checksum-sha256 is not the SHA-256 of its body is
                    refused (400 BadDigest); moto only stores the header. (The benchmark runs without it: moto as is.)
--auth              moto checks every request's SigV4 signature against an IAM user made at start (with a policy
                    allowing everything); its key is at GET /__credentials. Without it moto accepts any key.

Control endpoints (never logged):
  GET  /__log                         one JSON object per S3 request: method, path, query, status, and for
                                      CompleteMultipartUpload the part numbers listed ("parts") and how many
                                      ChecksumSHA256 it gives ("part_checksums"); "checksum_sha256" and
                                      "checksum_algorithm", "content_md5": the request's
                                      x-amz-checksum-sha256, x-amz-checksum-algorithm and Content-MD5
                                      headers, when it has them
  GET  /__object?key=K                {"size", "sha256"} of the object, 404 if there is none
  GET  /__uploads                     {"uploads": [[key, upload_id, parts], ...]}: multipart uploads in progress
  POST /__fault/status?code=503&count=N&action=UploadPart[&retry_after=S]
                                      the next N matching requests get that status with an S3 error body
                                      [&after=1]: moto serves the request first, then the answer is replaced
                                      (the server did the work, the client hears an error)
  POST /__fault/hold?action=CreateMultipartUpload&count=1
                                      moto serves the next COUNT matching requests, their answers are withheld
                                      (the connection stays open, silent) until /__fault/clear
  POST /__fault/expire?token=T        requests signed with session token T get 400 ExpiredToken, as S3 answers
                                      once temporary credentials expire
  POST /__fault/limit?max=N           PutObject and UploadPart bodies over N bytes get 400 EntityTooLarge, as from a
                                      provider with a lower size limit
  POST /__fault/listed_checksum?part=N
                                      ListParts gives part N a ChecksumSHA256 other than the one it was sent with
                                      (a part the server holds differs from the source)
  POST /__fault/slow?action=ListObjectsV2&seconds=S[&max_keys=N]
                                      every matching request is served S seconds late, and with max_keys its
                                      max-keys is at most N (a slow server with small pages: a long listing)
  POST /__fault/clear                 drops every armed fault and releases held answers
  POST /__abort                       aborts every multipart upload in progress (as a lifecycle rule would)
  GET  /__credentials                 {"access_key_id", "secret_access_key", "denied_access_key_id",
                                      "denied_secret_access_key"} (with --auth; the second user has no policy)

ListParts gives each part's ChecksumSHA256 when it was sent with one, and the upload's ChecksumAlgorithm, as S3
does (moto leaves them out). With --verify-checksums it also keeps S3's rules for uploads created with
x-amz-checksum-algorithm: SHA256 (moto keeps none): a part without its checksum, or a part with one sent to an upload
created without, is refused (400 InvalidRequest), and so is a Complete whose parts do not each list the
ChecksumSHA256 they were stored with (400 InvalidPart).
Like S3, every request's X-Amz-Date must be within 15 minutes of the server's clock (else 403
RequestTimeTooSkewed with RequestTime and ServerTime); moto itself does not check it. ListMultipartUploads gives
each upload's true creation time (moto's answer says 2010-11-10 for all). Each logged request has
"t" (seconds on the server's monotonic clock) and "token" (its X-Amz-Security-Token, if any).
"""

import argparse
import base64
import hashlib
import io
import json
import os
import re
import signal
import socket
import sys
import threading
import time
from datetime import datetime, timezone
from urllib.parse import parse_qs, urlencode


def exit_with_parent() -> None:
    """Dies when the test process does: exits once stdin reaches end of file."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def watch() -> None:
        while os.read(0, 4096):
            pass
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def action_of(method: str, query: dict, path: str) -> str:
    if "uploads" in query:
        return "CreateMultipartUpload" if method == "POST" else "ListMultipartUploads"
    if "list-type" in query and method == "GET":
        return "ListObjectsV2"
    if "uploadId" in query:
        return {
            "PUT": "UploadPart", "GET": "ListParts", "POST": "CompleteMultipartUpload",
            "DELETE": "AbortMultipartUpload",
        }.get(method, method)
    return {"PUT": "PutObject", "GET": "GetObject", "HEAD": "HeadObject", "DELETE": "DeleteObject"}.get(method, method)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--min-part-size", type=int, default=None)
    parser.add_argument("--auth", action="store_true")
    parser.add_argument("--verify-checksums", action="store_true")
    parser.add_argument("--standalone", action="store_true", help="do not exit when stdin closes (by hand)")
    args = parser.parse_args()
    if not args.standalone:
        exit_with_parent()
    if args.min_part_size is not None:
        os.environ["S3_UPLOAD_PART_MIN_SIZE"] = str(args.min_part_size)
    # moto reads these when imported.
    os.environ.setdefault("MOTO_ALLOW_NONEXISTENT_REGION", "true")
    if args.auth:
        # The first 5 requests (the IAM user, its key and its policy; a second user and key without a policy) go
    # unchecked; all later ones are.
        os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "5"

    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from moto.s3.models import s3_backends
    from werkzeug.serving import WSGIRequestHandler, make_server

    class QuietHandler(WSGIRequestHandler):
        def log_request(self, *args, **kwargs) -> None:
            pass

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    moto_app = DomainDispatcherApplication(create_backend_app)
    log: list = []
    faults: list = []
    lock = threading.Lock()
    credentials: dict = {}
    expired_tokens: set = set()
    limit: dict = {"max": None}
    holds: list = []  # [action, count]
    slow: dict = {}  # action -> (seconds, max_keys or None)
    part_checksums: dict = {}  # (UploadId, part number) -> the x-amz-checksum-sha256 it was stored with
    wrong_listed: set = set()  # part numbers ListParts gives a wrong checksum
    algorithms: dict = {}  # UploadId -> the x-amz-checksum-algorithm it was created with
    released = threading.Event()

    def reply(start_response, status: str, body: bytes, content_type: str = "application/json"):
        start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
        return [body]

    initiated: dict = {}  # UploadId -> when it was created, as S3 writes it

    def initiated_of(action: str, result: list) -> None:
        """moto lists every multipart upload as initiated on 2010-11-10; S3 gives the time it was created (a client
        that looks for uploads it may have created relies on that). Same length, so Content-Length holds."""
        import re
        if action == "CreateMultipartUpload":
            found = re.search(rb"<UploadId>([^<]+)</UploadId>", result[0])
            if found:
                with lock:
                    initiated[found.group(1)] = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z").encode()
            return

        def fix(upload: "re.Match") -> bytes:
            block = upload.group(0)
            upload_id = re.search(rb"<UploadId>([^<]+)</UploadId>", block)
            with lock:
                when = initiated.get(upload_id.group(1)) if upload_id else None
            return re.sub(rb"<Initiated>[^<]*</Initiated>", b"<Initiated>" + when + b"</Initiated>", block) if when \
                else block

        result[0] = re.sub(rb"<Upload>.*?</Upload>", fix, result[0], flags=re.S)

    def app(environ, start_response):
        path = environ.get("PATH_INFO", "")
        query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        method = environ["REQUEST_METHOD"]
        if path.startswith("/__"):
            if path == "/__log":
                with lock:
                    text = "".join(json.dumps(entry) + "\n" for entry in log)
                return reply(start_response, "200 OK", text.encode())
            if path == "/__object":
                key = query["key"][0]
                try:
                    obj = backend.get_object(args.bucket, key)
                except Exception:
                    obj = None
                if obj is None:
                    return reply(start_response, "404 Not Found", b"{}")
                value = obj.value
                return reply(start_response, "200 OK",
                             json.dumps({"size": len(value), "sha256": hashlib.sha256(value).hexdigest()}).encode())
            if path == "/__uploads":
                bucket = backend.get_bucket(args.bucket)
                uploads = [[m.key_name, m.id, len(m.parts)] for m in bucket.multiparts.values()]
                return reply(start_response, "200 OK", json.dumps({"uploads": uploads}).encode())
            if path == "/__fault/clear" and method == "POST":
                with lock:
                    faults.clear()
                    expired_tokens.clear()
                    limit["max"] = None
                    holds.clear()
                    slow.clear()
                    wrong_listed.clear()
                released.set()
                return reply(start_response, "200 OK", b"{}")
            if path.startswith("/__fault/status") and method == "POST":
                with lock:
                    faults.append({
                        "code": int(query.get("code", ["503"])[0]), "count": int(query.get("count", ["1"])[0]),
                        "action": query.get("action", [""])[0], "retry_after": query.get("retry_after", [None])[0],
                        "s3_code": query.get("s3_code", ["SlowDown"])[0],
                        "after": query.get("after", ["0"])[0] == "1",
                    })
                return reply(start_response, "200 OK", b"{}")
            if path == "/__fault/hold" and method == "POST":
                with lock:
                    released.clear()
                    holds.append([query.get("action", [""])[0], int(query.get("count", ["1"])[0])])
                return reply(start_response, "200 OK", b"{}")
            if path == "/__fault/slow" and method == "POST":
                max_keys = query.get("max_keys", [None])[0]
                with lock:
                    slow[query["action"][0]] = (float(query.get("seconds", ["1"])[0]),
                                                int(max_keys) if max_keys else None)
                return reply(start_response, "200 OK", b"{}")
            if path == "/__fault/listed_checksum" and method == "POST":
                with lock:
                    wrong_listed.add(int(query["part"][0]))
                return reply(start_response, "200 OK", b"{}")
            if path == "/__fault/expire" and method == "POST":
                with lock:
                    expired_tokens.add(query["token"][0])
                return reply(start_response, "200 OK", b"{}")
            if path == "/__fault/limit" and method == "POST":
                with lock:
                    limit["max"] = int(query["max"][0])
                return reply(start_response, "200 OK", b"{}")
            if path == "/__abort" and method == "POST":
                # A lifecycle rule's abort: the upload is gone, its parts with it.
                bucket = backend.get_bucket(args.bucket)
                for upload_id in list(bucket.multiparts.keys()):
                    try:
                        backend.abort_multipart_upload(args.bucket, upload_id)
                    except Exception:
                        # A request of a killed client may still be finishing on another thread and have taken it
                        # away meanwhile; what counts is that none is left, checked below.
                        pass
                if bucket.multiparts:
                    return reply(start_response, "500 Internal Server Error",
                                 json.dumps({"left": list(bucket.multiparts.keys())}).encode())
                return reply(start_response, "200 OK", b"{}")
            if path == "/__credentials":
                return reply(start_response, "200 OK", json.dumps(credentials).encode())
            return reply(start_response, "404 Not Found", b"{}")

        action = action_of(method, query, path)
        token = environ.get("HTTP_X_AMZ_SECURITY_TOKEN")
        entry = {"method": method, "path": path, "query": {k: v[0] for k, v in query.items()}, "action": action,
                 "length": int(environ.get("CONTENT_LENGTH") or 0), "t": time.monotonic()}
        if token:
            entry["token"] = token
        for header, member in (("HTTP_X_AMZ_CHECKSUM_SHA256", "checksum_sha256"),
                               ("HTTP_X_AMZ_CHECKSUM_ALGORITHM", "checksum_algorithm"),
                               ("HTTP_CONTENT_MD5", "content_md5")):
            if environ.get(header):
                entry[member] = environ[header]

        def refuse(status: str, code: str, message: str, extra: str = ""):
            """Answers with an S3 error (the body drained first), logged."""
            length = int(environ.get("CONTENT_LENGTH") or 0)
            if length:
                environ["wsgi.input"].read(length)
            entry["status"] = int(status.split(" ", 1)[0])
            with lock:
                log.append(entry)
            body = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code>"
                    f"<Message>{message}</Message>{extra}</Error>").encode()
            return reply(start_response, status, body, "application/xml")

        # S3 refuses a request signed more than 15 minutes away from its clock; moto does not check.
        amz_date = environ.get("HTTP_X_AMZ_DATE")
        if amz_date:
            signed = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
            now = datetime.now(timezone.utc)
            if abs((now - signed).total_seconds()) > 900:
                return refuse(
                    "403 Forbidden", "RequestTimeTooSkewed",
                    "The difference between the request time and the current time is too large.",
                    f"<RequestTime>{amz_date}</RequestTime><ServerTime>{now.strftime('%Y-%m-%dT%H:%M:%SZ')}"
                    "</ServerTime><MaxAllowedSkewMilliseconds>900000</MaxAllowedSkewMilliseconds>")
        with lock:
            expired = token in expired_tokens
            too_large = limit["max"] is not None and action in ("PutObject", "UploadPart") and \
                entry["length"] > limit["max"]
        if expired:
            return refuse("400 Bad Request", "ExpiredToken", "The provided token has expired.")
        if too_large:
            return refuse("400 Bad Request", "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size",
                          f"<ProposedSize>{entry['length']}</ProposedSize><MaxSizeAllowed>{limit['max']}"
                          "</MaxSizeAllowed>")
        if action == "CompleteMultipartUpload":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(length)
            environ["wsgi.input"] = io.BytesIO(body)
            entry["parts"] = [int(n) for n in re.findall(rb"<PartNumber>(\d+)</PartNumber>", body)]
            entry["part_checksums"] = len(re.findall(rb"<ChecksumSHA256>[^<]+</ChecksumSHA256>", body))
        if args.verify_checksums and action in ("PutObject", "UploadPart") and "checksum_sha256" in entry:
            body = environ["wsgi.input"].read(entry["length"])
            environ["wsgi.input"] = io.BytesIO(body)
            if base64.b64encode(hashlib.sha256(body).digest()).decode() != entry["checksum_sha256"]:
                environ["wsgi.input"] = io.BytesIO(b"")
                environ["CONTENT_LENGTH"] = "0"
                return refuse("400 Bad Request", "BadDigest",
                              "The SHA256 you specified did not match the calculated checksum.")
        if args.verify_checksums and action in ("UploadPart", "CompleteMultipartUpload"):
            upload_id = query.get("uploadId", [""])[0]
            with lock:
                algorithm = algorithms.get(upload_id)
            if action == "UploadPart" and (algorithm == "SHA256") != ("checksum_sha256" in entry):
                return refuse("400 Bad Request", "InvalidRequest",
                              f"Checksum Type mismatch occurred, expected checksum Type: {algorithm or 'null'}")
            if action == "CompleteMultipartUpload" and algorithm == "SHA256":
                body = environ["wsgi.input"].read()
                environ["wsgi.input"] = io.BytesIO(body)
                listed = dict((int(n), c.decode()) for n, c in re.findall(
                    rb"<PartNumber>(\d+)</PartNumber>\s*<ETag>[^<]*</ETag>\s*<ChecksumSHA256>([^<]+)</ChecksumSHA256>", body))
                with lock:
                    stored = {n: part_checksums.get((upload_id, n)) for n in entry.get("parts", [])}
                if any(listed.get(n) != c for n, c in stored.items()):
                    return refuse("400 Bad Request", "InvalidPart",
                                  "One or more of the specified parts could not be found or its checksum did not match.")
        with lock:
            fault = next((f for f in faults if f["count"] > 0 and (not f["action"] or f["action"] == action)), None)
            if fault:
                fault["count"] -= 1
            hold = next((h for h in holds if h[1] > 0 and h[0] == action), None)
            if hold:
                hold[1] -= 1
        if fault and fault["after"]:
            # The server does the work; the client hears an error (a lost or garbled answer).
            served = [b"".join(moto_app(environ, lambda status, headers, exc_info=None: None))]
            initiated_of(action, served)
            remember_algorithm(action, entry, served[0])
            entry["served"] = True
        if fault:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            if length:
                environ["wsgi.input"].read(length)
            entry["status"] = fault["code"]
            entry["fault"] = True
            with lock:
                log.append(entry)
            body = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{fault['s3_code']}</Code>"
                    f"<Message>injected by the test server</Message></Error>").encode()
            headers = [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))]
            if fault["retry_after"]:
                headers.append(("Retry-After", fault["retry_after"]))
            start_response(f"{fault['code']} Injected", headers)
            return [body]

        with lock:
            slowed = slow.get(action)
        if slowed:
            seconds, max_keys = slowed
            time.sleep(seconds)
            if max_keys is not None:
                asked = int(query.get("max-keys", ["1000"])[0])
                query["max-keys"] = [str(min(asked, max_keys))]
                environ["QUERY_STRING"] = urlencode({k: v[0] for k, v in query.items()})

        if action == "ListParts":
            return list_parts(environ, start_response, entry, query.get("uploadId", [""])[0])

        status_holder = {}

        def recording_start_response(status, headers, exc_info=None):
            status_holder["status"] = int(status.split(" ", 1)[0])
            return start_response(status, headers, exc_info)

        result = moto_app(environ, recording_start_response)
        entry["status"] = status_holder.get("status", 0)
        if action == "UploadPart" and entry["status"] == 200 and "checksum_sha256" in entry:
            with lock:
                part_checksums[(query["uploadId"][0], int(query["partNumber"][0]))] = entry["checksum_sha256"]
        if action in ("CreateMultipartUpload", "ListMultipartUploads"):
            result = [b"".join(result)]
            initiated_of(action, result)
            remember_algorithm(action, entry, result[0])
        if hold:
            # Served, but the answer never leaves: the client waits (or dies) without the response.
            result = list(result)
            entry["held"] = True
            with lock:
                log.append(entry)
            released.wait()
            held_socket = environ.get("werkzeug.socket")
            if held_socket is not None:
                held_socket.shutdown(socket.SHUT_RDWR)
            raise ConnectionAbortedError("held answer dropped")
        with lock:
            log.append(entry)
        return result

    def remember_algorithm(action: str, entry: dict, answer: bytes) -> None:
        """Keeps the checksum algorithm a CreateMultipartUpload asked for, by the UploadId moto answered."""
        created = re.search(rb"<UploadId>([^<]+)</UploadId>", answer) if action == "CreateMultipartUpload" else None
        if created and entry.get("checksum_algorithm"):
            with lock:
                algorithms[created.group(1).decode()] = entry["checksum_algorithm"]

    def list_parts(environ, start_response, entry, upload_id):
        """moto's ListParts with each part's ChecksumSHA256 added (wrong for the parts in `wrong_listed`)."""
        captured = {}

        def capture(status, headers, exc_info=None):
            captured.update(status=status, headers=headers)
            return lambda data: None

        body = b"".join(moto_app(environ, capture))

        def add(part: "re.Match") -> bytes:
            block = part.group(0)
            number = re.search(rb"<PartNumber>(\d+)</PartNumber>", block)
            with lock:
                value = part_checksums.get((upload_id, int(number.group(1)))) if number else None
                wrong = number is not None and int(number.group(1)) in wrong_listed
            if value is None:
                return block
            if wrong:
                value = base64.b64encode(hashlib.sha256(b"other bytes").digest()).decode()
            return block.replace(b"</Part>", b"<ChecksumSHA256>" + value.encode() + b"</ChecksumSHA256></Part>")

        body = re.sub(rb"<Part>.*?</Part>", add, body, flags=re.S)
        with lock:
            algorithm = algorithms.get(upload_id)
        if algorithm and b"<ChecksumAlgorithm>" not in body.split(b"<Part>")[0]:
            body = body.replace(b"</UploadId>", b"</UploadId><ChecksumAlgorithm>" + algorithm.encode()
                                + b"</ChecksumAlgorithm>", 1)
        headers = [(k, v) for k, v in captured["headers"] if k.lower() != "content-length"]
        headers.append(("Content-Length", str(len(body))))
        entry["status"] = int(captured["status"].split(" ", 1)[0])
        with lock:
            log.append(entry)
        start_response(captured["status"], headers)
        return [body]

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    port = sock.getsockname()[1]
    sock.close()
    server = make_server("127.0.0.1", port, app, threaded=True, request_handler=QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    if args.auth:
        import boto3
        endpoint = f"http://127.0.0.1:{port}"
        iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1",
                           aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
        iam.create_user(UserName="uploader")
        key = iam.create_access_key(UserName="uploader")["AccessKey"]
        iam.put_user_policy(UserName="uploader", PolicyName="all", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        iam.create_user(UserName="no-policy")
        denied = iam.create_access_key(UserName="no-policy")["AccessKey"]
        credentials.update({"access_key_id": key["AccessKeyId"], "secret_access_key": key["SecretAccessKey"],
                            "denied_access_key_id": denied["AccessKeyId"],
                            "denied_secret_access_key": denied["SecretAccessKey"]})
        with lock:
            log.clear()
    backend.create_bucket(args.bucket, "us-east-1")
    print(f"READY {port}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    sys.exit(main())
