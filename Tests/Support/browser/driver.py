#!/usr/bin/env python3
"""A headless Chromium that the browser tests of `trailbook-jobs web` drive, one JSON command a line.

Started by Tests/EndToEndTests/Support/BrowserSession.swift with the venv of setup.sh. Drives Debian's chromium
through /usr/bin/chromedriver (Debian's chromium-driver): selenium is told where it is, so it downloads nothing.

Once the browser runs it prints `READY 0`. Then each line on stdin is a command; each gets one JSON line on stdout: {"ok": true, "value": ...} or
{"ok": false, "error": "..."}:

  {"op": "open", "url": URL}                       navigate and wait for the document to load
  {"op": "eval", "js": BODY}                       run BODY (a function body; `return` gives the value)
  {"op": "wait", "js": BODY, "timeout": S}         run BODY until it returns something truthy (every 20 ms)
  {"op": "click", "css": SELECTOR}                 click the first element matching SELECTOR
  {"op": "alert", "accept": true|false}            answer the open confirm()/alert(), giving its text
  {"op": "no_alert"}                               true if no alert is open
  {"op": "screenshot", "path": PATH}               save a PNG of the window
  {"op": "clear_cookies"}                          forget the session cookie
  {"op": "log"}                                    the browser console's messages so far
  {"op": "quit"}                                   close the browser and exit (so does the end of stdin)
"""
import json
import sys
import time

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By


def start():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,900", "--no-first-run", "--disable-extensions"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)


def run(browser, command):
    op = command["op"]
    if op == "open":
        browser.get(command["url"])
        return browser.current_url
    if op == "eval":
        return browser.execute_script(command["js"])
    if op == "wait":
        deadline = time.monotonic() + command.get("timeout", 10)
        last = None
        while time.monotonic() < deadline:
            last = browser.execute_script(command["js"])
            if last:
                return last
            time.sleep(0.02)
        raise TimeoutError("not true within %ss (last: %r): %s" % (command.get("timeout", 10), last, command["js"]))
    if op == "click":
        browser.find_element(By.CSS_SELECTOR, command["css"]).click()
        return True
    if op == "alert":
        alert = browser.switch_to.alert
        text = alert.text
        alert.accept() if command.get("accept", True) else alert.dismiss()
        return text
    if op == "no_alert":
        try:
            browser.switch_to.alert
            return False
        except NoAlertPresentException:
            return True
    if op == "screenshot":
        return browser.save_screenshot(command["path"])
    if op == "clear_cookies":
        browser.delete_all_cookies()
        return True
    if op == "quit":
        raise SystemExit(0)
    if op == "log":
        return [entry["message"] for entry in browser.get_log("browser")]
    raise ValueError("unknown op %r" % op)


def main():
    browser = start()
    print("READY 0", flush=True)  # ReadyProcess waits for this line
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                reply = {"ok": True, "value": run(browser, json.loads(line))}
            except SystemExit:
                break
            except Exception as error:  # every failure goes back to the test, which reports it
                reply = {"ok": False, "error": "%s: %s" % (type(error).__name__, error)}
            print(json.dumps(reply, default=str), flush=True)
    finally:
        # Chromium and chromedriver outlive a killed driver: they are closed here, before the test stops it.
        browser.quit()
        print(json.dumps({"ok": True, "value": "quit"}), flush=True)


if __name__ == "__main__":
    main()
