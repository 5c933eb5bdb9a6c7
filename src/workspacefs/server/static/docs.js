// Swagger UI at /docs, from assets installed with the server extra (fastapi-offline), never from a CDN:
// the API's documentation works on a closed network. Its own file, so the page's policy stays script-src 'self'.
"use strict";

window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  validatorUrl: null, // the default asks a validator on the internet about the document
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
  // "Try it out" from a browser signed in at / sends its cookie; a change also needs this header (CSRF guard)
  requestInterceptor: (request) => {
    request.headers["X-Workspacefs"] = "1";
    return request;
  },
});
